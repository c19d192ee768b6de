// Instance-admin endpoints: workspaces, connections, subscriptions, tokens.
import type { Hono } from 'hono';
import type { Database } from '../../../db/database.js';
import type { KeyRing } from '../../../db/secret-box.js';
import { rotateConnectionSecret } from '../../sql/connection-secrets.js';
import {
  createConnection, createWorkspace, setConnectionState, setSubscription, setWorkspaceState,
} from '../../sql/connections.js';
import {
  createApiToken, listApiTokens, listConnections, listWorkspaces, revokeApiToken,
} from '../../sql/operator.js';
import { requireAdmin, type OperatorEnv } from '../auth.js';
import { optionalBoolean, readJsonObject } from '../body.js';
import { ApiError } from '../errors.js';
import { parseId, requireText } from '../params.js';

export function registerAdminRoutes(app: Hono<OperatorEnv>, db: Database, keyRing: Promise<KeyRing | undefined>): void {
  app.get('/workspaces', async (c) => {
    requireAdmin(c);
    return c.json(await listWorkspaces(db));
  });

  app.post('/workspaces', async (c) => {
    requireAdmin(c);
    const body = await readJsonObject(c);
    return c.json(await createWorkspace(db, parseId(body.id, 'id')), 201);
  });

  for (const [action, state] of [['suspend', 'SUSPENDED'], ['pause', 'PAUSED'], ['resume', 'ACTIVE'], ['activate', 'ACTIVE']] as const) {
    app.post(`/workspaces/:ws/${action}`, async (c) => {
      requireAdmin(c);
      return c.json(await setWorkspaceState(db, parseId(c.req.param('ws'), 'workspace'), state));
    });
    app.post(`/connections/:id/${action}`, async (c) => {
      requireAdmin(c);
      return c.json(await setConnectionState(db, parseId(c.req.param('id'), 'connection'), state));
    });
  }

  app.get('/workspaces/:ws/connections', async (c) => {
    requireAdmin(c);
    return c.json(await listConnections(db, parseId(c.req.param('ws'), 'workspace')));
  });

  app.post('/workspaces/:ws/connections', async (c) => {
    requireAdmin(c);
    const workspaceId = parseId(c.req.param('ws'), 'workspace');
    const body = await readJsonObject(c);
    const route = body.route ?? {};
    if (typeof route !== 'object' || route === null || Array.isArray(route)) {
      throw new ApiError(400, 'bad_request', 'route must be a JSON object');
    }
    const externalId = body.external_id;
    if (externalId !== undefined && externalId !== null && typeof externalId !== 'string') {
      throw new ApiError(400, 'bad_request', 'external_id must be a string');
    }
    const connection = await createConnection(db, {
      workspaceId,
      provider: requireText(body.provider, 'provider'),
      source: requireText(body.source, 'source'),
      kind: requireText(body.kind, 'kind'),
      externalId: externalId ?? null,
      route: route as Record<string, unknown>,
    });
    return c.json(connection, 201);
  });

  // The new secret is in this answer only; give it to the provider now.
  app.post('/connections/:id/rotate-secret', async (c) => {
    requireAdmin(c);
    const id = parseId(c.req.param('id'), 'connection');
    const body = await readJsonObject(c);
    const given = body.secret;
    const secret = await rotateConnectionSecret(db, await keyRing, id, given === undefined ? undefined : requireText(given, 'secret'),
      body.overlap === undefined ? true : optionalBoolean(body, 'overlap'));
    c.header('Cache-Control', 'no-store');
    return c.json({ connection_id: Number(id), secret });
  });

  app.post('/connections/:id/subscriptions', async (c) => {
    requireAdmin(c);
    const id = parseId(c.req.param('id'), 'connection');
    const subject = requireText((await readJsonObject(c)).subject, 'subject');
    return c.json({ connection_id: Number(id), subject, changed: await setSubscription(db, id, subject, true) });
  });

  app.delete('/connections/:id/subscriptions', async (c) => {
    requireAdmin(c);
    const id = parseId(c.req.param('id'), 'connection');
    const subject = requireText((await readJsonObject(c)).subject, 'subject');
    return c.json({ connection_id: Number(id), subject, changed: await setSubscription(db, id, subject, false) });
  });

  app.get('/workspaces/:ws/tokens', async (c) => {
    requireAdmin(c);
    return c.json(await listApiTokens(db, parseId(c.req.param('ws'), 'workspace')));
  });

  app.post('/workspaces/:ws/tokens', async (c) => {
    requireAdmin(c);
    const workspaceId = parseId(c.req.param('ws'), 'workspace');
    const name = requireText((await readJsonObject(c)).name, 'name', 64);
    const token = await createApiToken(db, workspaceId, name);
    // The token is in this answer only (the app sets no-store on every answer; this one must never lose it).
    c.header('Cache-Control', 'no-store');
    return c.json(token, 201);
  });

  app.delete('/workspaces/:ws/tokens/:id', async (c) => {
    requireAdmin(c);
    const workspaceId = parseId(c.req.param('ws'), 'workspace');
    const id = parseId(c.req.param('id'), 'token id');
    if (!(await revokeApiToken(db, workspaceId, id))) {
      throw new ApiError(404, 'not_found', `no live token ${id} in workspace ${workspaceId}`);
    }
    return c.json({ id: Number(id), revoked: true });
  });
}
