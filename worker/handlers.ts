// What a handler is, what it receives, and how an event finds its handler.
import type pg from 'pg';
import type { Logger } from 'pino';
import type { PayloadOf, TypedHandlerKey } from './provider-payloads.js';

/** The event a handler receives. Ids are bigint, passed as decimal strings. */
export interface InboxEvent<Payload = unknown> {
  id: string;
  workspaceId: string | null;
  provider: string;
  eventType: string;
  deliveryKey: string;
  subject: string | null;
  scopeKey: string;
  source: string;
  connectionId: string | null;
  payload: Payload;
  headers: Record<string, string>;
  receivedAt: Date;
  /** 1 on the first attempt (a release does not count one). */
  attempt: number;
  failures: number;
  replayedAt: Date | null;
}

export interface HandlerContext<Payload = unknown> {
  event: InboxEvent<Payload>;
  /** Aborts when the worker stops, the lease is lost, or handler_timeout passes. */
  signal: AbortSignal;
  /**
   * Runs `fn(tx)` in one transaction that records step `name` and fences the
   * lease; commits both or neither. Resolves undefined without calling `fn`
   * when the step committed on an earlier attempt. Names are stable ids.
   */
  step<T>(name: string, fn: (tx: pg.ClientBase) => Promise<T>): Promise<T | undefined>;
  /** Runs `fn(tx)` in one transaction fenced by the lease before commit. */
  transaction<T>(fn: (tx: pg.ClientBase) => Promise<T>): Promise<T>;
  logger: Logger;
}

// Method syntax makes the parameter bivariant, so that a handler typed for
// one payload still fits the map's catch-all `unknown` entries.
export type Handler<Payload = unknown> = {
  handle(ctx: HandlerContext<Payload>): Promise<void> | void;
}['handle'];

/**
 * Handlers keyed `provider:event_type`, with `provider:*` as each provider's
 * fallback. A typed key (`github:push`, `gitlab:merge_request`,
 * `slack:app_mention`) receives its provider's payload type; any other key
 * receives `unknown`. Write `export const handlers = { … } satisfies HandlerMap`.
 * A key whose value is `'ignore'` is claimed and completed as `ignored`;
 * an event with no key at all waits, in its scope's order, for a host
 * whose map has one.
 */
export type HandlerMap = { [Key in TypedHandlerKey]?: Handler<PayloadOf<Key>> | 'ignore' } & {
  [key: string]: Handler | 'ignore' | undefined;
};

/**
 * The handler of an event: a function, `'ignore'` (the map says so: it is
 * completed with outcome `ignored`), or undefined (this host has none).
 */
export function findHandler(handlers: HandlerMap, provider: string, eventType: string): Handler | 'ignore' | undefined {
  return handlers[`${provider}:${eventType}`] ?? handlers[`${provider}:*`];
}

/** The keys a host claims with (wharf.claim's p_handles): every key of its map. */
export function handledKeys(handlers: HandlerMap): string[] {
  return Object.keys(handlers).filter((key) => handlers[key] !== undefined).sort();
}
