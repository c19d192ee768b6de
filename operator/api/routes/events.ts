// Events of one workspace, and installation rows (NULL workspace) for the
// instance admin: list with filters, show with attempts and steps, dead
// letters, replay, and the admission log.
import { createRoute, type z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { Database } from '../../../db/database.js';
import {
  type EventFilter, type EventOwner, listAdmissions, listDead, listEvents, showEvent,
} from '../../sql/operator.js';
import { searchEvents } from '../../sql/event-search.js';
import { replayEvent } from '../../sql/replay-retention.js';
import { requireAdmin, requireWorkspace, type OperatorEnv, type Principal } from '../auth.js';
import { ApiError } from '../errors.js';
import { errors, json, jsonBody, routeGroup } from '../openapi.js';
import {
  admissionPage, eventDetail, eventFilterQuery, eventListQuery, eventPage, eventParam,
  installationEventParam, pageQuery, replayBody, workspaceParam,
} from '../schemas.js';

type Ctx = Context<OperatorEnv>;
const installation: EventOwner = { installation: true };

/** The workspace a route names, after checking the caller may reach it. */
function workspaceOwner(c: Ctx, ws: string): { owner: EventOwner; principal: Principal } {
  return { owner: { workspaceId: ws }, principal: requireWorkspace(c, ws) };
}

function filterOf(query: z.infer<typeof eventFilterQuery> & { state?: EventFilter['state'] }): EventFilter {
  return {
    limit: query.limit,
    ...(query.cursor ? { before: query.cursor } : {}),
    ...(query.state ? { state: query.state } : {}),
    ...(query.subject ? { subject: query.subject } : {}),
    ...(query.provider ? { provider: query.provider } : {}),
    ...(query.event_type ? { eventType: query.event_type } : {}),
    ...(query.received_after ? { receivedAfter: query.received_after } : {}),
    ...(query.received_before ? { receivedBefore: query.received_before } : {}),
  };
}

function notFound(id: string): ApiError {
  return new ApiError(404, 'not_found', `no event ${id} here`);
}

/** wharf.replay's answer as the API gives it: 202 with the event, or why not. */
async function replay(db: Database, owner: EventOwner, id: string, account: string, force: boolean) {
  const result = await replayEvent(db, owner, id, account, force);
  if (result.replayed) return result.event;
  switch (result.reason) {
    case 'not_found':
      throw notFound(id);
    case 'uncertain_outcome':
      throw new ApiError(409, 'uncertain_outcome',
        'the handler may have had an external effect; check it, then replay with {"force": true}');
    case 'not_replayable':
      throw new ApiError(409, 'not_replayable', `only a DEAD event can be replayed; this one is ${result.state}`,
        { state: result.state });
  }
}

const tags = ['events'];

export function eventRoutes(db: Database) {
  return routeGroup()
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/events', tags, summary: "A page of the workspace's events, newest first",
      description: 'With payload or headers (a JSON object), only the events whose payload or stored headers contain it '
        + '(JSON containment), combined with the other filters.',
      request: { params: workspaceParam, query: eventListQuery },
      responses: { 200: json(eventPage, 'a page of events'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws } = c.req.valid('param');
      const { owner } = workspaceOwner(c, ws);
      const query = c.req.valid('query');
      if (query.payload !== undefined || query.headers !== undefined) {
        const search = { ...(query.payload ? { payload: query.payload } : {}), ...(query.headers ? { headers: query.headers } : {}) };
        return c.json(await searchEvents(db, ws, search, filterOf(query)), 200);
      }
      return c.json(await listEvents(db, owner, filterOf(query)), 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/dead', tags, summary: "A page of the workspace's dead letters, newest first",
      request: { params: workspaceParam, query: eventFilterQuery },
      responses: { 200: json(eventPage, 'a page of DEAD events'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { owner } = workspaceOwner(c, c.req.valid('param').ws);
      return c.json(await listDead(db, owner, filterOf(c.req.valid('query'))), 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/events/{id}', tags, summary: 'One event: payload, headers, attempts and steps',
      request: { params: eventParam },
      responses: { 200: json(eventDetail, 'the event'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      const event = await showEvent(db, workspaceOwner(c, ws).owner, id);
      if (!event) throw notFound(id);
      return c.json(event, 200);
    })
    .openapi(createRoute({
      method: 'post', path: '/workspaces/{ws}/events/{id}/replay', tags,
      summary: 'Send a DEAD event back to the queue, due at once',
      request: { params: eventParam, body: jsonBody(replayBody) },
      responses: { 202: json(eventDetail, 'replayed: the event as it is just after'), ...errors(400, 403, 404, 409) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      const { owner, principal } = workspaceOwner(c, ws);
      return c.json(await replay(db, owner, id, principal.account, c.req.valid('json').force ?? false), 202);
    })
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/admissions', tags,
      summary: 'Deliveries refused or dropped at admission that concern the workspace, newest first',
      request: { params: workspaceParam, query: pageQuery },
      responses: { 200: json(admissionPage, 'a page of the admission log'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { owner } = workspaceOwner(c, c.req.valid('param').ws);
      const { limit, cursor } = c.req.valid('query');
      return c.json(await listAdmissions(db, owner, { limit, ...(cursor ? { before: cursor } : {}) }), 200);
    })
    // Installation rows (NULL workspace): the instance admin only. /dead is
    // registered before /{id}, which would otherwise take "dead" for an id.
    .openapi(createRoute({
      method: 'get', path: '/installation-events', tags, summary: 'A page of installation rows, newest first (admin)',
      request: { query: eventListQuery },
      responses: { 200: json(eventPage, 'a page of installation rows'), ...errors(400, 403) },
    }), async (c) => {
      requireAdmin(c);
      return c.json(await listEvents(db, installation, filterOf(c.req.valid('query'))), 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/installation-events/dead', tags, summary: 'A page of dead installation rows (admin)',
      request: { query: eventFilterQuery },
      responses: { 200: json(eventPage, 'a page of DEAD installation rows'), ...errors(400, 403) },
    }), async (c) => {
      requireAdmin(c);
      return c.json(await listDead(db, installation, filterOf(c.req.valid('query'))), 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/installation-events/{id}', tags, summary: 'One installation row (admin)',
      request: { params: installationEventParam },
      responses: { 200: json(eventDetail, 'the installation row'), ...errors(400, 403, 404) },
    }), async (c) => {
      requireAdmin(c);
      const { id } = c.req.valid('param');
      const event = await showEvent(db, installation, id);
      if (!event) throw notFound(id);
      return c.json(event, 200);
    })
    .openapi(createRoute({
      method: 'post', path: '/installation-events/{id}/replay', tags,
      summary: 'Send a DEAD installation row back to the queue, recorded in replay_audit (admin)',
      request: { params: installationEventParam, body: jsonBody(replayBody) },
      responses: { 202: json(eventDetail, 'replayed'), ...errors(400, 403, 404, 409) },
    }), async (c) => {
      const principal = requireAdmin(c);
      const { id } = c.req.valid('param');
      return c.json(await replay(db, installation, id, principal.account, c.req.valid('json').force ?? false), 202);
    })
    .openapi(createRoute({
      method: 'get', path: '/admissions', tags, summary: 'Every delivery refused or dropped at admission (admin)',
      request: { query: pageQuery },
      responses: { 200: json(admissionPage, 'a page of the admission log'), ...errors(400, 403) },
    }), async (c) => {
      requireAdmin(c);
      const { limit, cursor } = c.req.valid('query');
      return c.json(await listAdmissions(db, installation, { limit, ...(cursor ? { before: cursor } : {}) }), 200);
    });
}
