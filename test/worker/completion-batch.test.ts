// Completions that arrive together share one statement and one commit, each
// still answering for its own lease.
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CompletionBatcher } from '../../worker/completion-batcher.js';
import { claimEvents, completeEvents, type Completion } from '../../worker/sql/claim-lease.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { eventState, admitEvents } from '../support/worker-inbox.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

describe('CompletionBatcher', () => {
  it('completes leases that finish in the same turn in one statement, and reports a lost lease as false', async () => {
    await admitEvents(db.pool, Array.from({ length: 12 }, (_, n) => ({ scope: `batch-${n}` })));
    const rows = await claimEvents(db.pool, 'batcher', 12);
    expect(rows).toHaveLength(12);
    const stale = { ...rows[5]!, lease_epoch: String(Number(rows[5]!.lease_epoch) + 1) };

    let statements = 0;
    const query = db.pool.query.bind(db.pool);
    const counted = Object.assign(Object.create(db.pool) as typeof db.pool, {
      query: ((...args: Parameters<typeof db.pool.query>) => {
        statements += 1;
        return query(...args);
      }) as typeof db.pool.query,
    });
    const batcher = new CompletionBatcher<Completion>(counted, completeEvents, pino({ level: 'silent' }), new AbortController().signal, 1_000);
    const results = await Promise.all(rows.map((row, n) => new Promise<boolean>((resolve, reject) => {
      const lease = n === 5 ? stale : row;
      batcher.complete({ id: lease.id, epoch: lease.lease_epoch, outcome: 'handled' }, { completed: resolve, completionFailed: reject });
    })));

    expect(results).toEqual(rows.map((_, n) => n !== 5));
    // All twelve arrived in one turn of the event loop: one statement.
    expect(statements).toBe(1);
    for (const [n, row] of rows.entries()) {
      expect(await eventState(db.pool, row.id)).toMatchObject({ state: n === 5 ? 'LEASED' : 'DONE' });
    }
  });
});

describe('CompletionBatcher, when a waiter throws', () => {
  it('logs it, answers the batch\'s other waiters, and goes on with the next batch', async () => {
    await admitEvents(db.pool, Array.from({ length: 4 }, (_, n) => ({ scope: `throwing-${n}` })));
    const rows = await claimEvents(db.pool, 'batcher-throwing', 4);
    expect(rows).toHaveLength(4);
    const lines: string[] = [];
    const logger = pino({ level: 'error' }, { write: (line: string) => lines.push(line) });
    const batcher = new CompletionBatcher<Completion>(db.pool, completeEvents, logger, new AbortController().signal, 1_000);
    const heard = (row: (typeof rows)[number], throws = false) => new Promise<boolean>((resolve, reject) => {
      batcher.complete({ id: row.id, epoch: row.lease_epoch, outcome: 'handled' }, {
        completed: (done) => {
          resolve(done);
          if (throws) throw new TypeError('a listener of the host is broken');
        },
        completionFailed: reject,
      });
    });

    // One batch: the first waiter throws after hearing its answer.
    const firstBatch = [heard(rows[0]!, true), heard(rows[1]!), heard(rows[2]!)];
    expect(await Promise.all(firstBatch)).toEqual([true, true, true]);
    // A batch after it is still written.
    expect(await heard(rows[3]!)).toBe(true);
    for (const row of rows) expect(await eventState(db.pool, row.id)).toMatchObject({ state: 'DONE' });
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ error_class: 'TypeError' });
    expect(lines[0]).not.toContain('a listener of the host is broken');
  });
});
