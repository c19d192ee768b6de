// Issues: a workspace's failures grouped by provider, event type and error
// class (sql/97-issues.sql), their events, and their status; the issues of
// installation rows for the instance admin.
import { createRoute, z } from '@hono/zod-openapi';
import type { Database } from '../../../db/database.js';
import { issueEvents, issueHistory, listIssues, setIssueStatus, showIssue } from '../../sql/issues.js';
import { requireAdmin, requireWorkspace } from '../auth.js';
import { ApiError } from '../errors.js';
import { errors, json, jsonBody, routeGroup } from '../openapi.js';
import {
  eventPage, installationIssueParam, issue, issueHistoryQuery, issueHour, issueListQuery, issueParam, issueStatusBody, pageQuery,
  workspaceParam,
} from '../schemas.js';

const tags = ['issues'];

function notFound(id: string): ApiError {
  return new ApiError(404, 'not_found', `no issue ${id} here`);
}

export function issueRoutes(db: Database) {
  return routeGroup()
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/issues', tags,
      summary: "The workspace's issues (failures grouped by provider, event type and error class), latest seen first",
      request: { params: workspaceParam, query: issueListQuery },
      responses: { 200: json(z.array(issue), 'latest seen first'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws } = c.req.valid('param');
      requireWorkspace(c, ws);
      const { status, limit } = c.req.valid('query');
      return c.json(await listIssues(db, { workspaceId: ws }, { limit, ...(status ? { status } : {}) }), 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/issues/{id}', tags, summary: 'One issue',
      request: { params: issueParam },
      responses: { 200: json(issue, 'the issue'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      requireWorkspace(c, ws);
      const found = await showIssue(db, ws, id);
      if (!found) throw notFound(id);
      return c.json(found, 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/issues/{id}/events', tags,
      summary: "The issue's events: those whose last failure has its class, newest first",
      request: { params: issueParam, query: pageQuery },
      responses: { 200: json(eventPage, 'a page of events'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      requireWorkspace(c, ws);
      const { limit, cursor } = c.req.valid('query');
      const page = await issueEvents(db, ws, id, { limit, ...(cursor ? { before: cursor } : {}) });
      if (!page) throw notFound(id);
      return c.json(page, 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/issues/{id}/history', tags,
      summary: "The issue's failures and dead letters per hour, counted as they happen (the week before the last purge at most)",
      request: { params: issueParam, query: issueHistoryQuery },
      responses: { 200: json(z.array(issueHour), 'oldest hour first, zeros included'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      requireWorkspace(c, ws);
      const history = await issueHistory(db, ws, id, c.req.valid('query').hours);
      if (!history) throw notFound(id);
      return c.json(history, 200);
    })
    .openapi(createRoute({
      method: 'post', path: '/workspaces/{ws}/issues/{id}/status', tags,
      summary: 'Acknowledge, resolve, ignore or reopen an issue; recorded with who and when',
      description: 'A resolved issue reopens by itself when its failure returns; an ignored one keeps counting.',
      request: { params: issueParam, body: jsonBody(issueStatusBody, true) },
      responses: { 200: json(issue, 'the issue after'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      const principal = requireWorkspace(c, ws);
      const changed = await setIssueStatus(db, { workspaceId: ws }, id, c.req.valid('json').status, principal.account);
      if (!changed) throw notFound(id);
      return c.json(changed, 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/installation-issues', tags, summary: 'The issues of installation rows (admin)',
      request: { query: issueListQuery },
      responses: { 200: json(z.array(issue), 'latest seen first'), ...errors(400, 403) },
    }), async (c) => {
      requireAdmin(c);
      const { status, limit } = c.req.valid('query');
      return c.json(await listIssues(db, { installation: true }, { limit, ...(status ? { status } : {}) }), 200);
    })
    .openapi(createRoute({
      method: 'post', path: '/installation-issues/{id}/status', tags, summary: "Set an installation issue's status (admin)",
      request: { params: installationIssueParam, body: jsonBody(issueStatusBody, true) },
      responses: { 200: json(issue, 'the issue after'), ...errors(400, 403, 404) },
    }), async (c) => {
      const principal = requireAdmin(c);
      const { id } = c.req.valid('param');
      const changed = await setIssueStatus(db, { installation: true }, id, c.req.valid('json').status, principal.account);
      if (!changed) throw notFound(id);
      return c.json(changed, 200);
    });
}
