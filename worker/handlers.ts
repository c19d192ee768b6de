// What a handler is, what it receives, and how an event finds its handler.
import type pg from 'pg';
import type { Logger } from 'pino';

/** The event a handler receives. Ids are bigint, passed as decimal strings. */
export interface InboxEvent {
  id: string;
  workspaceId: string | null;
  provider: string;
  eventType: string;
  deliveryKey: string;
  subject: string | null;
  scopeKey: string;
  source: string;
  connectionId: string | null;
  payload: unknown;
  headers: Record<string, string>;
  receivedAt: Date;
  /** 1 on the first attempt (a release does not count one). */
  attempt: number;
  failures: number;
  replayedAt: Date | null;
}

export interface HandlerContext {
  event: InboxEvent;
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

export type Handler = (ctx: HandlerContext) => Promise<void> | void;

/** Handlers keyed `provider:event_type`, with `provider:*` as each provider's fallback. */
export type HandlerMap = Record<string, Handler>;

export function findHandler(handlers: HandlerMap, provider: string, eventType: string): Handler | undefined {
  return handlers[`${provider}:${eventType}`] ?? handlers[`${provider}:*`];
}
