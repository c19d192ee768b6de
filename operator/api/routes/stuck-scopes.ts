// Stuck scopes (sql/98-stuck-scopes.sql): scopes whose head has waited past
// a threshold, with what waits behind it, and the actions that unblock one,
// each recorded with who and when.
import { createRoute, z } from '@hono/zod-openapi';
import type { Database } from '../../../db/database.js';
import {
  deadLetterScopeHead, listScopeActions, listStuckScopes, pauseScopeConnection, retryScopeHead,
  type HeadActionResult,
} from '../../sql/stuck-scopes.js';
import { requireWorkspace } from '../auth.js';
import { ApiError } from '../errors.js';
import { errors, json, jsonBody, routeGroup } from '../openapi.js';
import {
  pageQuery, scopeAction, scopeActionBody, scopeActionResult, stuckScope, stuckScopeQuery, workspaceParam,
} from '../schemas.js';

const tags = ['stuck scopes'];

/** A refused head action as the API's 409, naming why and the head's state now. */
function refused(result: HeadActionResult): ApiError {
  const message = result.reason === 'leased'
    ? 'a handler holds this event; wait for its lease to end'
    : `this event no longer heads its scope (it is ${result.event.state}); reload the stuck scopes`;
  return new ApiError(409, result.reason ?? 'conflict', message, { state: result.event.state });
}

export function stuckScopeRoutes(db: Database) {
  return routeGroup()
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/stuck-scopes', tags,
      summary: 'Scopes whose head has waited past a threshold, oldest first, with what waits behind it',
      request: { params: workspaceParam, query: stuckScopeQuery },
      responses: { 200: json(z.array(stuckScope), 'oldest head first'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws } = c.req.valid('param');
      requireWorkspace(c, ws);
      const { older_than: olderThanSeconds, limit } = c.req.valid('query');
      return c.json(await listStuckScopes(db, ws, {
        limit, ...(olderThanSeconds !== undefined ? { olderThanSeconds } : {}),
      }), 200);
    })
    .openapi(createRoute({
      method: 'post', path: '/workspaces/{ws}/stuck-scopes/actions', tags,
      summary: 'Unblock a scope: retry its head now, move its head to the dead letters, or pause its connection',
      description: 'Recorded with who and when (GET /workspaces/{ws}/scope-actions). The head named must still head '
        + 'the scope (409 otherwise). retry_head is refused (409) while a handler holds the head; dead_letter_head then '
        + 'waits for that lease (after_lease: true): if it fails, the head is a dead letter instead of retried.',
      request: { params: workspaceParam, body: jsonBody(scopeActionBody, true) },
      responses: { 200: json(scopeActionResult, 'done'), ...errors(400, 403, 404, 409) },
    }), async (c) => {
      const { ws } = c.req.valid('param');
      const principal = requireWorkspace(c, ws);
      const { action, scope_key: scopeKey, event_id: eventId } = c.req.valid('json');
      if (action === 'pause_connection') {
        const connection = await pauseScopeConnection(db, ws, scopeKey, eventId, principal.account);
        return c.json({ action, done: true as const, connection }, 200);
      }
      const act = action === 'retry_head' ? retryScopeHead : deadLetterScopeHead;
      const result = await act(db, ws, scopeKey, eventId, principal.account);
      if (!result.done) throw refused(result);
      return c.json({ action, done: true as const, after_lease: result.after_lease ?? false, event: result.event }, 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/scope-actions', tags, summary: 'The newest actions taken on scopes, newest first',
      request: { params: workspaceParam, query: pageQuery.pick({ limit: true }) },
      responses: { 200: json(z.array(scopeAction), 'newest first'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws } = c.req.valid('param');
      requireWorkspace(c, ws);
      return c.json(await listScopeActions(db, ws, c.req.valid('query').limit), 200);
    });
}
