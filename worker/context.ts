// Builds the ctx a handler receives for one leased event.
import type pg from 'pg';
import type { Logger } from 'pino';
import type { AttemptTransactions } from './attempt-transactions.js';
import { runFencedTransaction, type FencedTransactionOptions } from './fenced-transaction.js';
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

/** Counted for every business transaction retried after a busy error. */
const countBusyRetry = (): void => retryTotal.inc({ outcome: 'retried' });

/**
 * The signal and the logger are made when the handler first reads them (or
 * runs a transaction), and what a transaction needs when the handler first
 * runs one: most short handlers do none of it, and each costs a run a few µs
 * (worker/lazy-abort.ts) or garbage to collect.
 */
export function createHandlerContext(options: {
  pool: pg.Pool;
  row: ProviderEventRow;
  abort: LazyAbort;
  attempt: AttemptTransactions;
  logger: () => Logger;
}): HandlerContext {
  const { pool, row, abort, attempt } = options;
  let transactionOptions: FencedTransactionOptions | undefined;
  const transactions = (): FencedTransactionOptions => (transactionOptions ??= {
    pool,
    attempt,
    get signal() {
      return abort.signal;
    },
    onBusyRetry: countBusyRetry,
  });
  const lease = (): LeaseWithToken => ({ id: row.id, epoch: row.lease_epoch, token: row.lease_token });
  return {
    event: toInboxEvent(row),
    get signal() {
      return abort.signal;
    },
    get logger() {
      return options.logger();
    },
    step: (name, fn) =>
      runFencedTransaction(transactions(), async (tx) => ((await claimStep(tx, lease(), name)) ? fn(tx) : undefined)),
    transaction: (fn) =>
      runFencedTransaction(transactions(), async (tx) => {
        const result = await fn(tx);
        await fenceEvent(tx, lease());
        return result;
      }),
  };
}
