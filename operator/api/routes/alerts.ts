// Alert rules (sql/99-alerts.sql) of a workspace, or of the instance for the
// admin, and the alerts they recorded with how their delivery went. A
// worker host sends them (worker/alerts.ts); the API never shows a rule's
// URL or secret, except a generated secret once, when it is made. A rule is
// edited in place (PUT: its id, and so its alerts, stay) and can be tried
// with a test alert, which the sender delivers on its next turn.
import { createRoute, z } from '@hono/zod-openapi';
import type { Database } from '../../../db/database.js';
import {
  createAlertRule, deleteAlertRule, editAlertRule, listAlertRules, listAlerts, sendTestAlert, type AlertOwner,
} from '../../sql/alerts.js';
import { requireAdmin, requireWorkspace } from '../auth.js';
import { ApiError } from '../errors.js';
import { errors, json, jsonBody, routeGroup } from '../openapi.js';
import {
  alert, alertRule, alertRuleBody, alertRuleEditBody, alertRuleParam, deletedAlertRule, instanceAlertRuleParam, newAlertRule, pageQuery,
  workspaceParam,
} from '../schemas.js';

const tags = ['alerts'];
const instance: AlertOwner = { instance: true };

function notFound(id: string): ApiError {
  return new ApiError(404, 'not_found', `no alert rule ${id} here`);
}

export function alertRoutes(db: Database) {
  return routeGroup()
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/alert-rules', tags, summary: "The workspace's alert rules",
      request: { params: workspaceParam },
      responses: { 200: json(z.array(alertRule), 'by id'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws } = c.req.valid('param');
      requireWorkspace(c, ws);
      return c.json(await listAlertRules(db, { workspaceId: ws }), 200);
    })
    .openapi(createRoute({
      method: 'post', path: '/workspaces/{ws}/alert-rules', tags,
      summary: 'Tell someone when an issue opens or reopens, dead letters pass a rate, an event waits too long, or a scope is stuck',
      request: { params: workspaceParam, body: jsonBody(alertRuleBody, true) },
      responses: { 201: json(newAlertRule, 'the rule (and a generated secret, once)'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws } = c.req.valid('param');
      const principal = requireWorkspace(c, ws);
      return c.json(await createAlertRule(db, { workspaceId: ws }, c.req.valid('json'), principal.account), 201);
    })
    .openapi(createRoute({
      method: 'put', path: '/workspaces/{ws}/alert-rules/{id}', tags,
      summary: 'Edit an alert rule in place, validated as a new one; its alerts stay, and its URL and secret when left out',
      request: { params: alertRuleParam, body: jsonBody(alertRuleEditBody, true) },
      responses: { 200: json(alertRule, 'the rule as edited'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      const principal = requireWorkspace(c, ws);
      const edited = await editAlertRule(db, { workspaceId: ws }, id, c.req.valid('json'), principal.account);
      if (!edited) throw notFound(id);
      return c.json(edited, 200);
    })
    .openapi(createRoute({
      method: 'post', path: '/workspaces/{ws}/alert-rules/{id}/test', tags,
      summary: "Send a test alert through the rule's channel, signed as usual and marked as a test; a worker host sends it within seconds",
      request: { params: alertRuleParam },
      responses: { 202: json(alert, 'the test alert, pending'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      const principal = requireWorkspace(c, ws);
      const sent = await sendTestAlert(db, { workspaceId: ws }, id, principal.account);
      if (!sent) throw notFound(id);
      return c.json(sent, 202);
    })
    .openapi(createRoute({
      method: 'delete', path: '/workspaces/{ws}/alert-rules/{id}', tags, summary: 'Delete an alert rule and its alerts',
      request: { params: alertRuleParam },
      responses: { 200: json(deletedAlertRule, 'deleted'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      requireWorkspace(c, ws);
      if (!(await deleteAlertRule(db, { workspaceId: ws }, id))) throw notFound(id);
      return c.json({ id: Number(id), deleted: true as const }, 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/alerts', tags, summary: "The newest alerts of the workspace's rules and how their delivery went",
      request: { params: workspaceParam, query: pageQuery.pick({ limit: true }) },
      responses: { 200: json(z.array(alert), 'newest first'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws } = c.req.valid('param');
      requireWorkspace(c, ws);
      return c.json(await listAlerts(db, { workspaceId: ws }, c.req.valid('query').limit), 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/alert-rules', tags, summary: "The instance's alert rules, over every workspace (admin)",
      responses: { 200: json(z.array(alertRule), 'by id'), ...errors(403) },
    }), async (c) => {
      requireAdmin(c);
      return c.json(await listAlertRules(db, instance), 200);
    })
    .openapi(createRoute({
      method: 'post', path: '/alert-rules', tags, summary: 'An alert rule over every workspace and the installation rows (admin)',
      request: { body: jsonBody(alertRuleBody, true) },
      responses: { 201: json(newAlertRule, 'the rule (and a generated secret, once)'), ...errors(400, 403) },
    }), async (c) => {
      const principal = requireAdmin(c);
      return c.json(await createAlertRule(db, instance, c.req.valid('json'), principal.account), 201);
    })
    .openapi(createRoute({
      method: 'put', path: '/alert-rules/{id}', tags, summary: 'Edit an instance alert rule in place (admin)',
      request: { params: instanceAlertRuleParam, body: jsonBody(alertRuleEditBody, true) },
      responses: { 200: json(alertRule, 'the rule as edited'), ...errors(400, 403, 404) },
    }), async (c) => {
      const principal = requireAdmin(c);
      const { id } = c.req.valid('param');
      const edited = await editAlertRule(db, instance, id, c.req.valid('json'), principal.account);
      if (!edited) throw notFound(id);
      return c.json(edited, 200);
    })
    .openapi(createRoute({
      method: 'post', path: '/alert-rules/{id}/test', tags, summary: 'Send a test alert of an instance rule (admin)',
      request: { params: instanceAlertRuleParam },
      responses: { 202: json(alert, 'the test alert, pending'), ...errors(400, 403, 404) },
    }), async (c) => {
      const principal = requireAdmin(c);
      const { id } = c.req.valid('param');
      const sent = await sendTestAlert(db, instance, id, principal.account);
      if (!sent) throw notFound(id);
      return c.json(sent, 202);
    })
    .openapi(createRoute({
      method: 'delete', path: '/alert-rules/{id}', tags, summary: 'Delete an instance alert rule (admin)',
      request: { params: instanceAlertRuleParam },
      responses: { 200: json(deletedAlertRule, 'deleted'), ...errors(400, 403, 404) },
    }), async (c) => {
      requireAdmin(c);
      const { id } = c.req.valid('param');
      if (!(await deleteAlertRule(db, instance, id))) throw notFound(id);
      return c.json({ id: Number(id), deleted: true as const }, 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/alerts', tags, summary: "The newest alerts of the instance's rules (admin)",
      request: { query: pageQuery.pick({ limit: true }) },
      responses: { 200: json(z.array(alert), 'newest first'), ...errors(400, 403) },
    }), async (c) => {
      requireAdmin(c);
      return c.json(await listAlerts(db, instance, c.req.valid('query').limit), 200);
    });
}
