// POST /hooks/:provider/:endpoint — verify, validate, admit once, answer after
// the commit. Every refusal to store is logged with its reason and counted.
import type { Context } from 'hono';
import type { Adapter, Endpoint } from './adapters/adapter.js';
import { adapters } from './adapters/index.js';
import type { ConnectionCache } from './connection-cache.js';
import { classifyDatabaseError, type Database } from '../db/database.js';
import { sqlState } from '../db/error-codes.js';
import { SecretKeyError } from '../db/secret-box.js';
import { declaredLength, InflightBudget, parseJsonBody, readBodyWithin } from './request-body.js';
import { sha256Hex, type Bytes } from './crypto.js';
import { readAppSecrets, type EdgeEnv, type EdgeSettings } from './settings.js';
import type { Receipt } from './sql/admission.js';
import type { Admit } from './coalesced-admission.js';
import type { Reject } from './rejection.js';
import type { EdgeLogger, EdgeMetrics } from './telemetry.js';

export interface ReceiverDeps {
  database: Database;
  /** How a verified delivery is admitted: one wharf.admit per request, or coalesced (edge/coalesced-admission.ts). */
  admit: Admit;
  connections: ConnectionCache;
  env: EdgeEnv;
  settings: EdgeSettings;
  logger: EdgeLogger;
  metrics: EdgeMetrics;
  reject: Reject;
}

/** What every log line and rejection of a delivery names: where it was posted. */
type Facts = { provider: string; endpoint: string };

/** A delivery id or an event type longer than this is refused (400): both are indexed and logged. */
const maxKeyLength = 255;

/**
 * SQLSTATEs of a body PostgreSQL cannot store though JavaScript parsed it: a
 * number out of numeric's range (22003), a text form it refuses (22P02,
 * 22P05 an escape it cannot represent), nesting past its stack (54001), or a
 * value past a size limit (54000).
 */
const unstorable = new Set(['22003', '22P02', '22P05', '54000', '54001']);

export function createWebhookReceiver(deps: ReceiverDeps) {
  const { logger, metrics, reject } = deps;

  function rejectDatabaseError(c: Context, error: unknown, facts: Record<string, unknown>): Response {
    const failure = classifyDatabaseError(error);
    // The SQLSTATE only: a server message may quote the payload.
    const sqlstate = sqlState(error);
    if (sqlstate && unstorable.has(sqlstate)) {
      return reject(c, 400, 'unstorable-body', 'PostgreSQL cannot store this body (a number out of range, nesting too deep, a value too long).',
        { ...facts, sqlstate });
    }
    if (failure === 'route-changed') {
      return reject(c, 503, failure, 'A route changed while the delivery was admitted; retry.', facts, { 'Retry-After': '1' });
    }
    if (failure === 'database-unavailable') {
      return reject(c, 503, failure, 'The inbox is unavailable; retry later.', { ...facts, sqlstate }, { 'Retry-After': '10' });
    }
    metrics.rejected(failure);
    logger.error({ event: 'webhook_failed', reason: failure, sqlstate, ...facts }, 'admission failed');
    return c.json({ error: 'internal', message: 'The delivery could not be stored.' }, 500);
  }

  // The environment does not change under a running receiver: each
  // configured app's endpoint is read from it once, not per delivery (on Node
  // every read of process.env is a call into the runtime). Only configured
  // apps are kept, so that requests to made-up names cannot grow the map.
  const appEndpoints = new Map<string, Endpoint>();

  /** The endpoint the route names, or a rejection. */
  async function resolveEndpoint(c: Context, adapter: Adapter, param: string): Promise<Endpoint | Response> {
    if (adapter.endpointKind === 'app') {
      const key = `${adapter.provider}/${param}`;
      const known = appEndpoints.get(key);
      if (known) return known;
      const app = readAppSecrets(deps.env, adapter.provider as 'github' | 'slack', param);
      if (!app) return reject(c, 404, 'unknown-app', 'No such app.', { provider: adapter.provider, endpoint: param });
      const endpoint: Endpoint = { kind: 'app', app: param, ...app };
      appEndpoints.set(key, endpoint);
      return endpoint;
    }
    const facts = { provider: adapter.provider, endpoint: param };
    if (!/^[1-9][0-9]{0,17}$/.test(param)) return reject(c, 404, 'unknown-connection', 'No such connection.', facts);
    let connection;
    try {
      connection = await deps.connections.get(Number(param));
    } catch (error) {
      if (error instanceof SecretKeyError) {
        // The key ring lacks the key the secret was stored under: an
        // operator's fix, after which the provider's retry goes through.
        logger.error({ event: 'secret_unreadable', ...facts, error: error.message }, 'connection secret does not decrypt');
        return reject(c, 503, 'secret-unreadable', 'The endpoint is not available; retry later.', facts, { 'Retry-After': '60' });
      }
      return rejectDatabaseError(c, error, facts);
    }
    if (!connection || connection.provider !== adapter.provider) {
      return reject(c, 404, 'unknown-connection', 'No such connection.', facts);
    }
    if (connection.tokenSha256s.length === 0 && connection.signingKeys.length === 0) {
      return reject(c, 404, 'connection-without-secret', 'No such connection.', facts);
    }
    return { kind: 'connection', connection };
  }

  function keptHeaders(adapter: Adapter, endpoint: Endpoint, headers: Headers): Record<string, string> {
    const kept: Record<string, string> = {};
    const keep = (names: readonly string[]) => {
      for (const name of names) {
        const value = headers.get(name);
        if (value !== null) kept[name] = value;
      }
    };
    keep(adapter.keptHeaders);
    if (adapter.keptHeadersOf) keep(adapter.keptHeadersOf(endpoint));
    return kept;
  }

  function reportReceipt(receipt: Receipt, { provider, endpoint }: Facts): void {
    // The common case, every recipient admitted, builds one log object and nothing else.
    if (receipt.refused.length === 0 && !receipt.dropped) {
      logger.info({ event: 'webhook_admitted', provider, endpoint, delivery_key: receipt.delivery_key, events: receipt.events.length },
        'delivery admitted');
      return;
    }
    const reasons = [...receipt.refused.map((refusal) => refusal.reason), ...(receipt.dropped ? [receipt.dropped] : [])];
    for (const reason of reasons) metrics.rejected(reason);
    logger.warn({ event: 'webhook_not_admitted', provider, endpoint, delivery_key: receipt.delivery_key, events: receipt.events.length, reasons },
      'delivery refused or dropped');
  }

  const budget = new InflightBudget(deps.settings.maxInflightBytes);

  return async function receiveWebhook(c: Context): Promise<Response> {
    const adapter = adapters.get(c.req.param('provider') ?? '');
    if (!adapter) return reject(c, 404, 'unknown-route', 'No such route.', { path: c.req.path });
    const param = c.req.param('endpoint') ?? '';
    const facts = { provider: adapter.provider, endpoint: param };
    // The free checks first, before any lookup of the endpoint: a request
    // without well-formed signature headers cannot be authentic, and one
    // that declares a body over the limit cannot be stored; neither costs a
    // query, a cache entry or any buffering.
    const shape = adapter.checkHeaders(c.req.raw.headers);
    if (!shape.ok) return reject(c, 401, shape.reason, 'The delivery is not signed by this endpoint.', facts);
    if (declaredLength(c.req.raw) > deps.settings.maxBodyBytes) {
      return reject(c, 413, 'body-too-large', `The body is over ${deps.settings.maxBodyBytes} bytes.`, facts);
    }
    const endpoint = await resolveEndpoint(c, adapter, param);
    if (endpoint instanceof Response) return endpoint;
    const endpointShape = adapter.checkEndpointHeaders?.(c.req.raw.headers, endpoint);
    if (endpointShape && !endpointShape.ok) {
      return reject(c, 401, endpointShape.reason, 'The delivery is not signed by this endpoint.', facts);
    }

    const reservation = { bytes: 0 };
    try {
      let reading;
      try {
        reading = await readBodyWithin(c.req.raw, deps.settings.maxBodyBytes, budget, reservation);
      } catch {
        // The client went away mid-body: nobody is left to answer.
        logger.debug({ event: 'client_gone', ...facts }, 'client closed the request before its body was read');
        return new Response(null, { status: 400 });
      }
      if (!reading.ok && reading.reason === 'body-too-large') {
        return reject(c, 413, 'body-too-large', `The body is over ${deps.settings.maxBodyBytes} bytes.`, facts);
      }
      if (!reading.ok) {
        return reject(c, 503, 'edge-busy', 'Too many deliveries are being read; retry shortly.', facts, { 'Retry-After': '5' });
      }
      return await admitVerified(c, adapter, endpoint, reading.body, facts, () => {
        budget.release(reservation.bytes);
        reservation.bytes = 0;
      });
    } finally {
      budget.release(reservation.bytes);
    }
  };

  async function admitVerified(
    c: Context, adapter: Adapter, endpoint: Endpoint, body: Bytes, facts: Facts, release: () => void,
  ): Promise<Response> {
    const headers = c.req.raw.headers;
    const nowMs = Date.now();
    const verification = await adapter.verify({ headers, body, endpoint, nowMs, url: c.req.url });
    if (!verification.ok) {
      return reject(c, 401, verification.reason, 'The delivery is not signed by this endpoint.', facts);
    }
    // Authenticated now: the budget bounds unauthenticated bytes only, so a
    // slow database cannot fill it with genuine deliveries.
    release();
    const parsed = adapter.parseBody ? adapter.parseBody(body, headers) : parseJsonBody(body);
    if (!parsed.ok) return reject(c, 400, parsed.reason, parsed.message, facts);
    const reading = await adapter.read({ headers, text: parsed.text, payload: parsed.value, endpoint, nowMs });
    if (reading.kind === 'invalid') return reject(c, 400, 'missing-field', reading.message, facts);
    if (reading.kind === 'stale') return reject(c, 401, 'stale-timestamp', 'The delivery is not signed by this endpoint.', facts);
    if (reading.kind === 'handshake') return c.json(reading.body, 200);
    if (reading.deliveryKey.length > maxKeyLength || reading.eventType.length > maxKeyLength) {
      return reject(c, 400, 'field-too-long',
        `A delivery id or event type is at most ${maxKeyLength} characters.`, facts);
    }

    let receipt: Receipt;
    try {
      receipt = await deps.admit({
        provider: adapter.provider,
        source: endpoint.kind === 'app' ? endpoint.source : endpoint.connection.source,
        deliveryKey: reading.deliveryKey,
        eventType: reading.eventType,
        route: reading.route,
        subjects: reading.subjects,
        payloadText: parsed.text,
        headers: keptHeaders(adapter, endpoint, headers),
        ...((reading.dedupeByBody ?? adapter.signsBodyOnly) ? { bodySha256: sha256Hex(body) } : {}),
      });
    } catch (error) {
      return rejectDatabaseError(c, error, { ...facts, delivery_key: reading.deliveryKey });
    }
    reportReceipt(receipt, facts);
    if (reading.emptyAnswer) return c.body(null, 200);
    // The receipt as admit returned it (DESIGN.md), plus delivery_id, the name
    // the provider-facing API used first.
    return c.json({ status: 'accepted', ...receipt, delivery_id: receipt.delivery_key }, adapter.acceptedStatus ?? 202);
  }
}
