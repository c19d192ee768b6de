// Bulk replay: every DEAD event of a workspace that matches a filter, replayed
// in bounded batches in the background; followed by its id.
import { createRoute, z } from '@hono/zod-openapi';
import type { Database } from '../../../db/database.js';
import { followBulkReplay, startBulkReplayInBackground } from '../../bulk-replay-runner.js';
import { cancelBulkReplay, countBulkReplay, listBulkReplays } from '../../sql/bulk-replay.js';
import { requireWorkspace } from '../auth.js';
import { ApiError } from '../errors.js';
import { errors, json, jsonBody, routeGroup } from '../openapi.js';
import { bulkReplay, bulkReplayBody, bulkReplayCount, bulkReplayParam, cancelledBulkReplay, workspaceParam } from '../schemas.js';

const tags = ['replays'];

export function bulkReplayRoutes(db: Database, onUnexpectedError?: (error: unknown) => void) {
  return routeGroup()
    .openapi(createRoute({
      method: 'post', path: '/workspaces/{ws}/replays', tags,
      summary: 'Replay every DEAD event of the workspace that matches the filter, in id order, in batches',
      description: 'Answers at once with the bulk replay (state running); follow it at /workspaces/{ws}/replays/{id}.',
      request: { params: workspaceParam, body: jsonBody(bulkReplayBody) },
      responses: { 202: json(bulkReplay, 'started'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws } = c.req.valid('param');
      const principal = requireWorkspace(c, ws);
      const { force, ...filter } = c.req.valid('json');
      const started = await startBulkReplayInBackground(db, ws, filter, principal.account, {
        force: force ?? false, onError: onUnexpectedError,
      });
      return c.json(started, 202);
    })
    .openapi(createRoute({
      method: 'post', path: '/workspaces/{ws}/replays/count', tags,
      summary: 'How many DEAD events a bulk replay with this filter would take now; replays nothing',
      description: 'The count an operator sees before starting a bulk replay with the same body.',
      request: { params: workspaceParam, body: jsonBody(bulkReplayBody) },
      responses: { 200: json(bulkReplayCount, 'the count'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws } = c.req.valid('param');
      requireWorkspace(c, ws);
      const { force, ...filter } = c.req.valid('json');
      return c.json({ matched: await countBulkReplay(db, ws, filter, force ?? false) }, 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/replays', tags, summary: "The workspace's 50 newest bulk replays",
      request: { params: workspaceParam },
      responses: { 200: json(z.array(bulkReplay), 'newest first'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws } = c.req.valid('param');
      requireWorkspace(c, ws);
      return c.json(await listBulkReplays(db, ws), 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/replays/{id}', tags, summary: 'A bulk replay and its progress',
      description: 'A running one whose runner stopped (e.g. the server restarted) is carried on from where it is.',
      request: { params: bulkReplayParam },
      responses: { 200: json(bulkReplay, 'the bulk replay'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      requireWorkspace(c, ws);
      const found = await followBulkReplay(db, ws, id, { onError: onUnexpectedError });
      if (!found) throw new ApiError(404, 'not_found', `no bulk replay ${id} here`);
      return c.json(found, 200);
    })
    .openapi(createRoute({
      method: 'post', path: '/workspaces/{ws}/replays/{id}/cancel', tags, summary: 'Cancel a running bulk replay',
      description: 'No batch replays anything after the one running now, which finishes first; what was replayed stays replayed. '
        + 'Recorded with who cancelled it, and answered with cancelled true whenever it was running when asked, even if '
        + 'the batch in flight was its last. A bulk replay already finished is answered as it is, with cancelled false.',
      request: { params: bulkReplayParam },
      responses: { 200: json(cancelledBulkReplay, 'the bulk replay after'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      const principal = requireWorkspace(c, ws);
      return c.json(await cancelBulkReplay(db, ws, id, principal.account), 200);
    });
}
