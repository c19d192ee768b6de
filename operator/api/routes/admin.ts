// Instance-admin endpoints: workspaces, connections, subscriptions, tokens
// (a workspace token may only read its own workspace's connections).
import { createRoute, type RouteHandler } from '@hono/zod-openapi';
import type { Database } from '../../../db/database.js';
import { providersWithSecretIn, titlesOf } from '../../../db/providers.js';
import type { KeyRing } from '../../../db/secret-box.js';
import { rotateConnectionSecret } from '../../sql/connection-secrets.js';
import {
  createConnection, createWorkspace, setConnectionState, setSubscription, setWorkspaceState,
} from '../../sql/connections.js';
import {
  createApiToken, listApiTokens, listConnections, listWorkspaces, revokeApiToken,
} from '../../sql/operator.js';
import { requireAdmin, requireWorkspace, type OperatorEnv } from '../auth.js';
import { ApiError } from '../errors.js';
import { errors, json, jsonBody, routeGroup } from '../openapi.js';
import {
  apiToken, connection, connectionParam, newApiToken, newConnectionBody, newTokenBody, newWorkspaceBody,
  revokedToken, rotateSecretBody, rotatedSecret, subscriptionBody, subscriptionChange, tokenParam, workspace,
  workspaceParam,
} from '../schemas.js';
import { z } from '@hono/zod-openapi';

const tags = ['admin'];

// Which providers' connections hold a secret of their own, from the registry:
// a provider added there is never missing here.
const rotateSecretDescription = `A signing key for ${titlesOf(providersWithSecretIn('signing_key'))} `
  + `(stored encrypted under WHARF_SECRET_KEYS); a token for ${titlesOf(providersWithSecretIn('token'))} (stored as its SHA-256 only). `
  + `A connection of ${titlesOf(providersWithSecretIn('app'), 'or')} has none (400): its app's secret is in the edge's environment.`;

/** What each state-changing verb sets; resume and activate are the same. */
const stateOf = { suspend: 'SUSPENDED', pause: 'PAUSED', resume: 'ACTIVE', activate: 'ACTIVE' } as const;
type StateVerb = keyof typeof stateOf;

function workspaceStateRoute(verb: StateVerb) {
  return createRoute({
    method: 'post', path: `/workspaces/{ws}/${verb}`, tags,
    summary: `${verb[0]!.toUpperCase()}${verb.slice(1)} a workspace (${stateOf[verb]})`,
    request: { params: workspaceParam },
    responses: { 200: json(workspace, 'the workspace as it is now'), ...errors(400, 403, 404) },
  });
}

function connectionStateRoute(verb: StateVerb) {
  return createRoute({
    method: 'post', path: `/connections/{id}/${verb}`, tags,
    summary: `${verb[0]!.toUpperCase()}${verb.slice(1)} a connection (${stateOf[verb]})`,
    request: { params: connectionParam },
    responses: { 200: json(connection, 'the connection as it is now'), ...errors(400, 403, 404) },
  });
}

function setWorkspaceStateHandler(
  db: Database, verb: StateVerb,
): RouteHandler<ReturnType<typeof workspaceStateRoute>, OperatorEnv> {
  return async (c) => {
    requireAdmin(c);
    return c.json(await setWorkspaceState(db, c.req.valid('param').ws, stateOf[verb]), 200);
  };
}

function setConnectionStateHandler(
  db: Database, verb: StateVerb,
): RouteHandler<ReturnType<typeof connectionStateRoute>, OperatorEnv> {
  return async (c) => {
    requireAdmin(c);
    return c.json(await setConnectionState(db, c.req.valid('param').id, stateOf[verb]), 200);
  };
}

/** POST subscribes, DELETE unsubscribes: the same request and answer. */
function subscriptionRoute(method: 'post' | 'delete', summary: string) {
  return createRoute({
    method, path: '/connections/{id}/subscriptions', tags, summary,
    request: { params: connectionParam, body: jsonBody(subscriptionBody, true) },
    responses: { 200: json(subscriptionChange, 'whether it changed'), ...errors(400, 403, 404) },
  });
}

function setSubscriptionHandler(
  db: Database, subscribed: boolean,
): RouteHandler<ReturnType<typeof subscriptionRoute>, OperatorEnv> {
  return async (c) => {
    requireAdmin(c);
    const { id } = c.req.valid('param');
    const { subject } = c.req.valid('json');
    return c.json({ connection_id: Number(id), subject, changed: await setSubscription(db, id, subject, subscribed) }, 200);
  };
}

export function adminRoutes(db: Database, keyRing: Promise<KeyRing | undefined>) {
  return routeGroup()
    .openapi(createRoute({
      method: 'get', path: '/workspaces', tags, summary: 'Every workspace',
      responses: { 200: json(z.array(workspace), 'the workspaces, by id'), ...errors(403) },
    }), async (c) => {
      requireAdmin(c);
      return c.json(await listWorkspaces(db), 200);
    })
    .openapi(createRoute({
      method: 'post', path: '/workspaces', tags, summary: 'Create a workspace (ACTIVE) unless it exists',
      request: { body: jsonBody(newWorkspaceBody, true) },
      responses: { 201: json(workspace, 'the workspace'), ...errors(400, 403) },
    }), async (c) => {
      requireAdmin(c);
      return c.json(await createWorkspace(db, c.req.valid('json').id), 201);
    })
    .openapi(workspaceStateRoute('suspend'), setWorkspaceStateHandler(db, 'suspend'))
    .openapi(workspaceStateRoute('pause'), setWorkspaceStateHandler(db, 'pause'))
    .openapi(workspaceStateRoute('resume'), setWorkspaceStateHandler(db, 'resume'))
    .openapi(workspaceStateRoute('activate'), setWorkspaceStateHandler(db, 'activate'))
    .openapi(connectionStateRoute('suspend'), setConnectionStateHandler(db, 'suspend'))
    .openapi(connectionStateRoute('pause'), setConnectionStateHandler(db, 'pause'))
    .openapi(connectionStateRoute('resume'), setConnectionStateHandler(db, 'resume'))
    .openapi(connectionStateRoute('activate'), setConnectionStateHandler(db, 'activate'))
    .openapi(createRoute({
      method: 'get', path: '/connections', tags, summary: 'Every connection of every workspace, with its subscriptions',
      responses: { 200: json(z.array(connection), 'the connections, by id'), ...errors(403) },
    }), async (c) => {
      requireAdmin(c);
      return c.json(await listConnections(db), 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/connections', tags,
      summary: "The workspace's connections with their subscriptions (a workspace token reads its own; no secrets)",
      request: { params: workspaceParam },
      responses: { 200: json(z.array(connection), 'the connections, by id'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws } = c.req.valid('param');
      requireWorkspace(c, ws);
      return c.json(await listConnections(db, ws), 200);
    })
    .openapi(createRoute({
      method: 'post', path: '/workspaces/{ws}/connections', tags,
      summary: 'Create a connection, or give an existing one (same provider, source, kind, external id) this route',
      request: { params: workspaceParam, body: jsonBody(newConnectionBody, true) },
      responses: { 201: json(connection, 'the connection'), ...errors(400, 403, 404, 409) },
    }), async (c) => {
      requireAdmin(c);
      const body = c.req.valid('json');
      return c.json(await createConnection(db, {
        workspaceId: c.req.valid('param').ws,
        provider: body.provider, source: body.source, kind: body.kind,
        externalId: body.external_id ?? null, route: body.route ?? {},
      }), 201);
    })
    // The new secret is in this answer only; give it to the provider now.
    .openapi(createRoute({
      method: 'post', path: '/connections/{id}/rotate-secret', tags,
      summary: 'Give a connection a new secret, shown once',
      description: rotateSecretDescription,
      request: { params: connectionParam, body: jsonBody(rotateSecretBody) },
      responses: { 200: json(rotatedSecret, 'the new secret, shown once'), ...errors(400, 403, 404) },
    }), async (c) => {
      requireAdmin(c);
      const { id } = c.req.valid('param');
      const body = c.req.valid('json');
      const secret = await rotateConnectionSecret(db, await keyRing, id, body.secret, body.overlap ?? true);
      return c.json({ connection_id: Number(id), secret }, 200);
    })
    .openapi(subscriptionRoute('post',
      "Subscribe a connection's workspace to a subject (within the connection's subject prefixes)"),
    setSubscriptionHandler(db, true))
    .openapi(subscriptionRoute('delete', 'Unsubscribe a connection from a subject'), setSubscriptionHandler(db, false))
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/tokens', tags, summary: "The workspace's API tokens, without secrets",
      request: { params: workspaceParam },
      responses: { 200: json(z.array(apiToken), 'the tokens, revoked ones included'), ...errors(400, 403, 404) },
    }), async (c) => {
      requireAdmin(c);
      return c.json(await listApiTokens(db, c.req.valid('param').ws), 200);
    })
    .openapi(createRoute({
      method: 'post', path: '/workspaces/{ws}/tokens', tags, summary: 'Create a workspace API token',
      request: { params: workspaceParam, body: jsonBody(newTokenBody, true) },
      responses: { 201: json(newApiToken, 'the token, shown once'), ...errors(400, 403, 404, 409) },
    }), async (c) => {
      requireAdmin(c);
      return c.json(await createApiToken(db, c.req.valid('param').ws, c.req.valid('json').name), 201);
    })
    .openapi(createRoute({
      method: 'delete', path: '/workspaces/{ws}/tokens/{id}', tags, summary: 'Revoke a workspace API token',
      request: { params: tokenParam },
      responses: { 200: json(revokedToken, 'revoked'), ...errors(400, 403, 404) },
    }), async (c) => {
      requireAdmin(c);
      const { ws, id } = c.req.valid('param');
      if (!(await revokeApiToken(db, ws, id))) {
        throw new ApiError(404, 'not_found', `no live token ${id} in workspace ${ws}`);
      }
      return c.json({ id: Number(id), revoked: true as const }, 200);
    });
}
