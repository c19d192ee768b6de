// Builds the ctx a handler receives for one leased event.
import type pg from 'pg';
import type { Logger } from 'pino';
import type { AttemptTransactions } from './attempt-transactions.js';
import { runFencedTransaction } from './fenced-transaction.js';
import type { HandlerContext, InboxEvent } from './handlers.js';
import type { LazyAbort } from './lazy-abort.js';
import { retryTotal } from './metrics.js';
import { claimStep, fenceEvent } from './sql/steps-fences.js';
import type { LeaseWithToken, ProviderEventRow } from './sql/event-row.js';

export function toInboxEvent(row: ProviderEventRow): InboxEvent {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    provider: row.provider,
    eventType: row.event_type,
    deliveryKey: row.delivery_key,
    subject: row.subject,
    scopeKey: row.scope_key,
    source: row.source,
    connectionId: row.connection_id,
    payload: row.payload,
    headers: row.headers,
    receivedAt: row.received_at,
    attempt: row.attempt,
    failures: row.failures,
    replayedAt: row.replayed_at,
  };
}

/**
 * The signal and the logger are made when the handler first reads them (or
 * runs a transaction): most short handlers read neither, and each costs a
 * run a few µs (worker/lazy-abort.ts).
 */
export function createHandlerContext(options: {
  pool: pg.Pool;
  row: ProviderEventRow;
  abort: LazyAbort;
  attempt: AttemptTransactions;
  logger: () => Logger;
}): HandlerContext {
  const { pool, row, abort, attempt } = options;
  const lease: LeaseWithToken = { id: row.id, epoch: row.lease_epoch, token: row.lease_token };
  const transactionOptions = {
    pool,
    attempt,
    get signal() {
      return abort.signal;
    },
    onBusyRetry: () => retryTotal.inc({ outcome: 'retried' }),
  };
  return {
    event: toInboxEvent(row),
    get signal() {
      return abort.signal;
    },
    get logger() {
      return options.logger();
    },
    step: (name, fn) =>
      runFencedTransaction(transactionOptions, async (tx) => ((await claimStep(tx, lease, name)) ? fn(tx) : undefined)),
    transaction: (fn) =>
      runFencedTransaction(transactionOptions, async (tx) => {
        const result = await fn(tx);
        await fenceEvent(tx, lease);
        return result;
      }),
  };
}
