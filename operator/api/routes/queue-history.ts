// The figures behind the console's charts, per minute, from the inbox itself.
import { createRoute, z } from '@hono/zod-openapi';
import type { Database } from '../../../db/database.js';
import { deliveryHistory } from '../../sql/delivery-history.js';
import { failureHistory } from '../../sql/issues.js';
import { queueHistory } from '../../sql/queue-history.js';
import { requireWorkspace } from '../auth.js';
import { errors, json, routeGroup } from '../openapi.js';
import { deliveryMinute, failureMinute, historyQuery, queueMinute, workspaceParam } from '../schemas.js';

export function queueHistoryRoutes(db: Database) {
  return routeGroup()
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/queue-history', tags: ['events'],
      summary: "Per minute: admitted, handled, dead, queue depth and the oldest waiting event's age",
      request: { params: workspaceParam, query: historyQuery },
      responses: { 200: json(z.array(queueMinute), 'oldest minute first'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws } = c.req.valid('param');
      requireWorkspace(c, ws);
      return c.json(await queueHistory(db, ws, c.req.valid('query').hours), 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/failure-history', tags: ['issues'],
      summary: 'Per minute: failed or expired leases and dead letters, counted as they happen',
      request: { params: workspaceParam, query: historyQuery },
      responses: { 200: json(z.array(failureMinute), 'oldest minute first'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws } = c.req.valid('param');
      requireWorkspace(c, ws);
      return c.json(await failureHistory(db, ws, c.req.valid('query').hours), 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/delivery-history', tags: ['events'],
      summary: 'Per minute and connection: deliveries accepted, and refused or dropped by reason',
      request: { params: workspaceParam, query: historyQuery },
      responses: { 200: json(z.array(deliveryMinute), 'oldest minute first; minutes without a delivery left out'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws } = c.req.valid('param');
      requireWorkspace(c, ws);
      return c.json(await deliveryHistory(db, ws, c.req.valid('query').hours), 200);
    });
}
