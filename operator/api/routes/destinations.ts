// Destinations (contract v6): the workspace's own application endpoints that
// `wharf worker` forwards its events to, the rules that route events there,
// and their deliveries, dead letters and replay (operator/sql/destinations.ts).
// A workspace token reaches its own workspace's only (403 otherwise; 404 for
// an id that is not the workspace's). A bad URL, spec or filter is a 400 that
// names the bad part, and nothing is saved. A destination's signing secret
// is drawn here and answered once, by create and rotate-secret; credentials
// are never answered at all, only has_credentials and credentials_type.
//
// Paths under a destination are registered before the destination's own, so
// that the OpenAPI document lists its DELETE last (and a delivery's replay
// before the bulk replay): a client that walks the document in order finds
// each thing still there.
import { createRoute, z } from '@hono/zod-openapi';
import type { Database } from '../../../db/database.js';
import type { KeyRing } from '../../../db/secret-box.js';
import {
  clearDestinationCredentials, countDeadDeliveries, createDestination, createDestinationRule, deleteDestination,
  deleteDestinationRule, eventDeliveries, listDeliveries, listDestinationRules, listDestinations, replayDeadDeliveries,
  replayDelivery, replayDeliveryBatch, rotateDestinationSecret, setDestinationCredentials, setDestinationState,
  showDelivery, showDestination, testDestinationFilter, updateDestination, updateDestinationRule,
  defaultDeliveryReplayBatch, type DeliveryReplayFilter,
} from '../../sql/destinations.js';
import { requireWorkspace } from '../auth.js';
import { ApiError } from '../errors.js';
import { errors, json, jsonBody, routeGroup } from '../openapi.js';
import {
  credentialsBody, deletedDestination, deliveryDetail, deliveryListQuery, deliveryPage, deliveryParam,
  deliveryReplayBody, deliveryReplayCount, deliveryReplayFilterBody, deliveryReplayResult, destination, destinationEditBody,
  destinationParam, destinationRule, destinationRuleEditBody, destinationRuleParam, destinationWithSecret,
  eventDestinationDeliveries, eventParam, filterTestBody, filterTestResult, newDestinationBody, newDestinationRuleBody,
  pageQuery, rotateDestinationSecretBody, workspaceParam,
} from '../schemas.js';

const tags = ['destinations'];

function noDestination(id: string): ApiError {
  return new ApiError(404, 'not_found', `no destination ${id} here`);
}

function noRule(id: string): ApiError {
  return new ApiError(404, 'not_found', `no destination rule ${id} here`);
}

function noDelivery(id: string): ApiError {
  return new ApiError(404, 'not_found', `no delivery ${id} here`);
}

/** The destination's, after checking it is the workspace's. */
async function requireDestination(db: Database, ws: string, id: string): Promise<void> {
  if (!(await showDestination(db, ws, id))) throw noDestination(id);
}

/** The body's filter without the run's own settings, its absent fields left out. */
function replayFilterOf(body: z.infer<typeof deliveryReplayFilterBody>): DeliveryReplayFilter {
  return Object.fromEntries(Object.entries(body).filter(([key, value]) => value !== undefined
    && ['event_type', 'error_class', 'dead_after', 'dead_before'].includes(key))) as DeliveryReplayFilter;
}

export function destinationRoutes(db: Database, keyRing: Promise<KeyRing | undefined>) {
  return routeGroup()
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/destinations', tags,
      summary: "The workspace's destinations, each with its state, breaker and figures (deliveries per minute, success rate, latency, dead letters)",
      request: { params: workspaceParam },
      responses: { 200: json(z.array(destination), 'by id'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws } = c.req.valid('param');
      requireWorkspace(c, ws);
      return c.json(await listDestinations(db, ws), 200);
    })
    .openapi(createRoute({
      method: 'post', path: '/workspaces/{ws}/destinations', tags,
      summary: "Forward the workspace's events to an HTTPS endpoint of your application; its signing secret is answered once",
      description: 'The destination gets a Standard Webhooks signing secret (whsec_…) drawn by Wharf, stored encrypted, '
        + 'answered here once and never again (rotate-secret draws a new one). Events reach it once a rule routes them there. '
        + 'A bad URL or setting is a 400 naming it, and nothing is saved. 503 when the server has no WHARF_SECRET_KEYS.',
      request: { params: workspaceParam, body: jsonBody(newDestinationBody, true) },
      responses: { 201: json(destinationWithSecret, 'the destination, and its signing secret this once'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws } = c.req.valid('param');
      requireWorkspace(c, ws);
      return c.json(await createDestination(db, keyRing, ws, c.req.valid('json')), 201);
    })
    .openapi(createRoute({
      method: 'post', path: '/workspaces/{ws}/destinations/filter-test', tags,
      summary: "Whether a rule's filter matches a stored event of the workspace; saves nothing",
      description: 'The filter is matched against {"payload": …, "headers": …} of the event as stored. A bad filter is a 400 naming its bad part.',
      request: { params: workspaceParam, body: jsonBody(filterTestBody, true) },
      responses: { 200: json(filterTestResult, 'whether it matched'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws } = c.req.valid('param');
      requireWorkspace(c, ws);
      const { filter, event_id: eventId } = c.req.valid('json');
      const result = await testDestinationFilter(db, ws, filter, eventId);
      if (!result) throw new ApiError(404, 'not_found', `no event ${eventId} here`);
      return c.json(result, 200);
    })
    .openapi(createRoute({
      method: 'post', path: '/workspaces/{ws}/destinations/{id}/pause', tags,
      summary: 'Pause a destination: its deliveries are kept and wait until it is resumed',
      request: { params: destinationParam },
      responses: { 200: json(destination, 'the destination, PAUSED'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      const principal = requireWorkspace(c, ws);
      const paused = await setDestinationState(db, ws, id, 'PAUSED', principal.account);
      if (!paused) throw noDestination(id);
      return c.json(paused, 200);
    })
    .openapi(createRoute({
      method: 'post', path: '/workspaces/{ws}/destinations/{id}/resume', tags,
      summary: 'Resume a destination, paused or held by its circuit breaker: its deliveries go again at once',
      request: { params: destinationParam },
      responses: { 200: json(destination, 'the destination, ACTIVE'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      const principal = requireWorkspace(c, ws);
      const resumed = await setDestinationState(db, ws, id, 'ACTIVE', principal.account);
      if (!resumed) throw noDestination(id);
      return c.json(resumed, 200);
    })
    .openapi(createRoute({
      method: 'post', path: '/workspaces/{ws}/destinations/{id}/rotate-secret', tags,
      summary: 'Draw a new signing secret, answered this once; the previous one keeps signing beside it for 24 hours unless overlap is false',
      request: { params: destinationParam, body: jsonBody(rotateDestinationSecretBody) },
      responses: { 200: json(destinationWithSecret, 'the destination and its new secret, this once'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      requireWorkspace(c, ws);
      const rotated = await rotateDestinationSecret(db, keyRing, ws, id, c.req.valid('json').overlap ?? true);
      if (!rotated) throw noDestination(id);
      return c.json(rotated, 200);
    })
    .openapi(createRoute({
      method: 'put', path: '/workspaces/{ws}/destinations/{id}/credentials', tags,
      summary: 'Set the credentials sent to an endpoint behind an API gateway: a bearer token, basic credentials or a header',
      description: 'Stored encrypted and never answered again: a destination shows only has_credentials and credentials_type.',
      request: { params: destinationParam, body: jsonBody(credentialsBody, true) },
      responses: { 200: json(destination, 'the destination'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      requireWorkspace(c, ws);
      const changed = await setDestinationCredentials(db, keyRing, ws, id, c.req.valid('json'));
      if (!changed) throw noDestination(id);
      return c.json(changed, 200);
    })
    .openapi(createRoute({
      method: 'delete', path: '/workspaces/{ws}/destinations/{id}/credentials', tags,
      summary: "Clear a destination's credentials",
      request: { params: destinationParam },
      responses: { 200: json(destination, 'the destination'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      requireWorkspace(c, ws);
      const changed = await clearDestinationCredentials(db, ws, id);
      if (!changed) throw noDestination(id);
      return c.json(changed, 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/destinations/{id}/rules', tags, summary: "The rules that route events to a destination",
      request: { params: destinationParam },
      responses: { 200: json(z.array(destinationRule), 'by id'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      requireWorkspace(c, ws);
      await requireDestination(db, ws, id);
      return c.json(await listDestinationRules(db, ws, id), 200);
    })
    .openapi(createRoute({
      method: 'post', path: '/workspaces/{ws}/destinations/{id}/rules', tags,
      summary: 'Route events to a destination: by connection or provider, event type patterns, subject prefix and a filter; every criterion given must hold',
      description: 'A bad pattern or filter is a 400 naming its bad part, and nothing is saved.',
      request: { params: destinationParam, body: jsonBody(newDestinationRuleBody) },
      responses: { 201: json(destinationRule, 'the rule'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      requireWorkspace(c, ws);
      await requireDestination(db, ws, id);
      return c.json(await createDestinationRule(db, ws, id, c.req.valid('json')), 201);
    })
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/destination-rules', tags, summary: "Every destination rule of the workspace",
      request: { params: workspaceParam },
      responses: { 200: json(z.array(destinationRule), 'by id'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws } = c.req.valid('param');
      requireWorkspace(c, ws);
      return c.json(await listDestinationRules(db, ws), 200);
    })
    .openapi(createRoute({
      method: 'patch', path: '/workspaces/{ws}/destination-rules/{id}', tags,
      summary: 'Change a rule: only the fields given (null clears a criterion), validated as a new one',
      request: { params: destinationRuleParam, body: jsonBody(destinationRuleEditBody) },
      responses: { 200: json(destinationRule, 'the rule as changed'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      requireWorkspace(c, ws);
      const rule = await updateDestinationRule(db, ws, id, c.req.valid('json'));
      if (!rule) throw noRule(id);
      return c.json(rule, 200);
    })
    .openapi(createRoute({
      method: 'delete', path: '/workspaces/{ws}/destination-rules/{id}', tags,
      summary: 'Delete a rule: events it matched from now on are no longer routed by it',
      request: { params: destinationRuleParam },
      responses: { 200: json(z.object({ id: z.number(), deleted: z.literal(true) }), 'deleted'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      requireWorkspace(c, ws);
      if (!(await deleteDestinationRule(db, ws, id))) throw noRule(id);
      return c.json({ id: Number(id), deleted: true as const }, 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/destinations/{id}/deliveries', tags,
      summary: "A page of a destination's deliveries, newest first, optionally in one state",
      request: { params: destinationParam, query: deliveryListQuery },
      responses: { 200: json(deliveryPage, 'a page of deliveries'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      requireWorkspace(c, ws);
      const { state, limit, cursor } = c.req.valid('query');
      const page = await listDeliveries(db, ws, id, { limit, ...(state ? { state } : {}), ...(cursor ? { before: cursor } : {}) });
      if (!page) throw noDestination(id);
      return c.json(page, 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/destinations/{id}/dead', tags,
      summary: "A page of a destination's dead letters (DEAD deliveries), newest first",
      request: { params: destinationParam, query: pageQuery },
      responses: { 200: json(deliveryPage, 'a page of DEAD deliveries'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      requireWorkspace(c, ws);
      const { limit, cursor } = c.req.valid('query');
      const page = await listDeliveries(db, ws, id, { state: 'DEAD', limit, ...(cursor ? { before: cursor } : {}) });
      if (!page) throw noDestination(id);
      return c.json(page, 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/deliveries/{id}', tags, summary: 'One delivery to a destination, with its attempts',
      request: { params: deliveryParam },
      responses: { 200: json(deliveryDetail, 'the delivery'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      requireWorkspace(c, ws);
      const delivery = await showDelivery(db, ws, id);
      if (!delivery) throw noDelivery(id);
      return c.json(delivery, 200);
    })
    .openapi(createRoute({
      method: 'post', path: '/workspaces/{ws}/deliveries/{id}/replay', tags,
      summary: 'Send a DEAD delivery back to the queue, due at once; it keeps its id, so its webhook-id',
      request: { params: deliveryParam },
      responses: { 202: json(deliveryDetail, 'replayed: the delivery as it is just after'), ...errors(400, 403, 404, 409) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      const principal = requireWorkspace(c, ws);
      const replayed = await replayDelivery(db, ws, id, principal.account);
      const delivery = await showDelivery(db, ws, id);
      if (!delivery) throw noDelivery(id);
      if (!replayed) {
        throw new ApiError(409, 'not_replayable', `only a DEAD delivery can be replayed; this one is ${delivery.state}`, { state: delivery.state });
      }
      return c.json(delivery, 202);
    })
    .openapi(createRoute({
      method: 'post', path: '/workspaces/{ws}/destinations/{id}/replays/count', tags,
      summary: "How many of a destination's dead letters a bulk replay with this filter would take now; replays nothing",
      request: { params: destinationParam, body: jsonBody(deliveryReplayFilterBody) },
      responses: { 200: json(deliveryReplayCount, 'the count'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      requireWorkspace(c, ws);
      await requireDestination(db, ws, id);
      return c.json({ matched: await countDeadDeliveries(db, ws, id, replayFilterOf(c.req.valid('json'))) }, 200);
    })
    .openapi(createRoute({
      method: 'post', path: '/workspaces/{ws}/destinations/{id}/replays', tags,
      summary: "Replay a destination's dead letters that match the filter, in id order, in batches",
      description: 'Each batch is one transaction. By default every batch runs before the answer, up to the count taken when '
        + 'it starts (a delivery that dies again meanwhile is not replayed twice by it); with one_batch, one batch runs '
        + 'and the caller repeats until replayed is 0, e.g. to show progress. Count first with …/replays/count.',
      request: { params: destinationParam, body: jsonBody(deliveryReplayBody) },
      responses: { 200: json(deliveryReplayResult, 'how many were replayed'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      const principal = requireWorkspace(c, ws);
      await requireDestination(db, ws, id);
      const body = c.req.valid('json');
      const filter = replayFilterOf(body);
      const batch = body.batch_size ?? defaultDeliveryReplayBatch;
      if (body.one_batch) {
        return c.json({ replayed: await replayDeliveryBatch(db, ws, id, filter, principal.account, batch) }, 200);
      }
      const upTo = await countDeadDeliveries(db, ws, id, filter);
      return c.json({ replayed: await replayDeadDeliveries(db, ws, id, filter, principal.account, { upTo, batch }) }, 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/events/{id}/deliveries', tags,
      summary: "One event's deliveries to the workspace's destinations, each with its own state",
      request: { params: eventParam },
      responses: { 200: json(eventDestinationDeliveries, 'one per destination the event was routed to'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      requireWorkspace(c, ws);
      const deliveries = await eventDeliveries(db, ws, id);
      if (!deliveries) throw new ApiError(404, 'not_found', `no event ${id} here`);
      return c.json(deliveries, 200);
    })
    .openapi(createRoute({
      method: 'get', path: '/workspaces/{ws}/destinations/{id}', tags,
      summary: 'One destination: its settings, state, breaker and figures; never a secret',
      request: { params: destinationParam },
      responses: { 200: json(destination, 'the destination'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      requireWorkspace(c, ws);
      const found = await showDestination(db, ws, id);
      if (!found) throw noDestination(id);
      return c.json(found, 200);
    })
    .openapi(createRoute({
      method: 'patch', path: '/workspaces/{ws}/destinations/{id}', tags,
      summary: 'Change a destination: only the fields given; a bad URL or setting is a 400 naming it, and nothing changes',
      request: { params: destinationParam, body: jsonBody(destinationEditBody, true) },
      responses: { 200: json(destination, 'the destination as changed'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      requireWorkspace(c, ws);
      const changed = await updateDestination(db, ws, id, c.req.valid('json'));
      if (!changed) throw noDestination(id);
      return c.json(changed, 200);
    })
    .openapi(createRoute({
      method: 'delete', path: '/workspaces/{ws}/destinations/{id}', tags,
      summary: 'Delete a destination with its rules and deliveries',
      request: { params: destinationParam },
      responses: { 200: json(deletedDestination, 'deleted'), ...errors(400, 403, 404) },
    }), async (c) => {
      const { ws, id } = c.req.valid('param');
      requireWorkspace(c, ws);
      if (!(await deleteDestination(db, ws, id))) throw noDestination(id);
      return c.json({ id: Number(id), deleted: true as const }, 200);
    });
}
