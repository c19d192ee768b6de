// Failure classification, end to end: a handler throws an error nested in
// causes, and the row ends as the classification says (or is not written).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker, OutcomeUncertainError, PayloadParsingError, TransientError, type HandlerMap, type RunOutcome, type Worker } from '../../worker/index.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { captureLogs, type CapturedLogs } from '../support/worker-logs.js';
import { eventState, admitEvents, setSettings, waitFor, waitForState } from '../support/worker-inbox.js';
import { metricValue } from '../support/worker-metrics.js';

let db: TestDatabase;
let worker: Worker;
let logs: CapturedLogs;
const outcomes = new Map<string, RunOutcome>();
const ranBy = new Map<string, string>();

function wrapped(cause: unknown): Error {
  return new Error('handler failed', { cause: new AggregateError([new Error('unrelated'), cause], 'several') });
}

function overflow(depth: number): number {
  return overflow(depth + 1) + 1;
}

class HttpError extends Error {
  override name = 'HttpError';
  constructor(readonly status: number) {
    super(`HTTP ${status}`);
  }
}

const handlers: HandlerMap = {
  'generic:ok': (ctx) => void ranBy.set(ctx.event.id, 'generic:ok'),
  'generic:not-for-us': 'ignore',
  'github:*': (ctx) => void ranBy.set(ctx.event.id, 'github:*'),
  'github:push': (ctx) => void ranBy.set(ctx.event.id, 'github:push'),
  'generic:payload-parsing': () => {
    throw wrapped(new PayloadParsingError('field x is not a date'));
  },
  'generic:json-parse': () => {
    try {
      JSON.parse('{not json');
    } catch (error) {
      throw new Error('could not read the body', { cause: error });
    }
  },
  'generic:transient-503': () => {
    throw wrapped(new TransientError('upstream unavailable', { status: 503 }));
  },
  'generic:http-429': () => {
    throw new Error('rate limited', { cause: new HttpError(429) });
  },
  'generic:econnreset': () => {
    throw new Error('fetch failed', { cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }) });
  },
  'generic:uncertain': () => {
    throw wrapped(new OutcomeUncertainError('the charge may have gone through', { cause: new TransientError('timeout') }));
  },
  'generic:unknown': () => {
    throw new Error('secret-message-value', { cause: (() => { try { return overflow(0); } catch (error) { return error; } })() });
  },
  'github:erase-me': async (ctx) => {
    await db.pool.query(`SELECT wharf.erase_person($1, '{"ids": ["4242"]}')`, [ctx.event.source]);
    await ctx.step('after-erasure', async () => undefined).catch((error: unknown) => {
      throw new Error('step failed', { cause: error });
    });
  },
  'generic:fails-once': (ctx) => {
    if (ctx.event.attempt === 1) throw new TransientError('upstream unavailable', { status: 503 });
  },
  'generic:lease-stolen': async (ctx) => {
    // As if the lease expired and another worker claimed the row.
    await db.pool.query('UPDATE wharf.provider_event SET lease_epoch = lease_epoch + 1 WHERE id = $1', [ctx.event.id]);
    await ctx.transaction(async () => undefined).catch((error: unknown) => {
      throw new Error('write refused', { cause: error });
    });
  },
  'generic:busy-fence': async (ctx) => {
    // A reaper or an erasure holds the row for a moment.
    const holder = await db.connect();
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM wharf.provider_event WHERE id = $1 FOR UPDATE', [ctx.event.id]);
    setTimeout(() => void holder.query('COMMIT'), 300);
    await ctx.step('busy-step', (tx) => tx.query('CREATE TABLE IF NOT EXISTS busy_step_ran (event_id bigint)').then(() =>
      tx.query('INSERT INTO busy_step_ran VALUES ($1)', [ctx.event.id]),
    ));
  },
};

async function handle(eventType: string, options: { provider?: string; payload?: unknown } = {}): Promise<{ id: string; outcome: RunOutcome }> {
  const [id] = await admitEvents(db.pool, [{ scope: `scope-${eventType}`, eventType, ...options }]);
  const outcome = await waitFor(async () => outcomes.get(id!), 10_000, `event ${eventType} to settle`);
  return { id: id!, outcome };
}

beforeAll(async () => {
  db = await createTestDatabase();
  // Failed rows stay queued for the test to look at.
  await setSettings(db.pool, { base_delay: '1 hour', max_delay: '2 hours' });
  logs = captureLogs();
  worker = createWorker({ pool: db.pool, handlers, concurrency: 8, logger: logs.logger, settings: { pollEvery: 100 } });
  worker.on('settled', ({ eventId, outcome }) => outcomes.set(eventId, outcome));
  await worker.start();
});

afterAll(async () => {
  await worker?.stop();
  await db?.drop();
});

describe('dispatch', () => {
  it("completes an event type the map marks 'ignore' as ignored, and counts it", async () => {
    const before = await metricValue('integration_consumer_completed_total', { outcome: 'ignored' });
    const { id, outcome } = await handle('not-for-us');
    expect(outcome).toBe('ignored');
    expect(await eventState(db.pool, id)).toMatchObject({ state: 'DONE', outcome: 'ignored' });
    expect(await metricValue('integration_consumer_completed_total', { outcome: 'ignored' })).toBe(before + 1);
  });

  it('leaves an event type it has no handler for to a host that has one; ignoreUnhandled completes it as ignored', async () => {
    const [id] = await admitEvents(db.pool, [{ scope: 'scope-nobody', eventType: 'nobody-handles-this' }]);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await eventState(db.pool, id!)).toMatchObject({ state: 'QUEUED', attempt: 0 });
    const sweeper = createWorker({ pool: db.pool, handlers: {}, ignoreUnhandled: true, logger: logs.logger, settings: { pollEvery: 100 } });
    await sweeper.start();
    try {
      await waitFor(async () => (await eventState(db.pool, id!))?.state === 'DONE', 10_000, 'the unhandled event to be ignored');
      expect(await eventState(db.pool, id!)).toMatchObject({ state: 'DONE', outcome: 'ignored' });
    } finally {
      await sweeper.stop();
    }
  });

  it('counts the attempts a handled event took: attempts per handled event', async () => {
    const handled = await metricValue('integration_consumer_completed_total', { outcome: 'handled' });
    const attempts = await metricValue('integration_consumer_handled_attempts_total');
    const { id, outcome } = await handle('fails-once');
    expect(outcome).toBe('retried');
    expect(await metricValue('integration_consumer_handled_attempts_total'), 'a failed attempt adds nothing').toBe(attempts);
    outcomes.delete(id);
    await db.pool.query('UPDATE wharf.provider_event SET next_attempt_at = now() WHERE id = $1', [id]);
    expect(await waitFor(async () => outcomes.get(id), 10_000, 'the retry to settle')).toBe('handled');
    expect(await metricValue('integration_consumer_completed_total', { outcome: 'handled' })).toBe(handled + 1);
    expect(await metricValue('integration_consumer_handled_attempts_total'), 'handled at its second attempt').toBe(attempts + 2);
  });

  it('prefers provider:event_type and falls back to provider:*', async () => {
    const push = await handle('push', { provider: 'github' });
    const issues = await handle('issues', { provider: 'github' });
    expect(ranBy.get(push.id)).toBe('github:push');
    expect(ranBy.get(issues.id)).toBe('github:*');
    expect(await eventState(db.pool, issues.id)).toMatchObject({ state: 'DONE', outcome: 'handled' });
  });
});

describe('classification through nested causes', () => {
  it('a PayloadParsingError inside an AggregateError is permanent: DEAD at once, budget untouched', async () => {
    const before = await metricValue('integration_consumer_dead_total', { kind: 'permanent' });
    const { id, outcome } = await handle('payload-parsing');
    expect(outcome).toBe('dead');
    expect(await eventState(db.pool, id)).toMatchObject({ state: 'DEAD', failures: 0, error_class: 'PayloadParsingError' });
    expect(await metricValue('integration_consumer_dead_total', { kind: 'permanent' })).toBe(before + 1);
  });

  it('a SyntaxError from JSON.parse as a cause is permanent', async () => {
    const { id } = await handle('json-parse');
    expect(await eventState(db.pool, id)).toMatchObject({ state: 'DEAD', failures: 0, error_class: 'SyntaxError' });
  });

  it.each([
    ['transient-503', 'TransientError'],
    ['http-429', 'HttpError'],
    ['econnreset', 'Error:ECONNRESET'],
  ])('%s is transient: queued again without using the budget', async (eventType, errorClass) => {
    const before = await metricValue('integration_consumer_retry_total', { outcome: 'transient' });
    const { id, outcome } = await handle(eventType);
    expect(outcome).toBe('retried');
    expect(await eventState(db.pool, id)).toMatchObject({ state: 'QUEUED', failures: 0, error_class: errorClass });
    expect(await metricValue('integration_consumer_retry_total', { outcome: 'transient' })).toBe(before + 1);
  });

  it('an OutcomeUncertainError wins over the transient error it wraps: DEAD, outcome uncertain', async () => {
    const { id } = await handle('uncertain');
    expect(await eventState(db.pool, id)).toMatchObject({
      state: 'DEAD',
      outcome: 'uncertain',
      failures: 0,
      error_class: 'OutcomeUncertainError',
    });
  });

  it('a stack overflow is unknown: one unit of the budget, and its first-attempt log is sanitized', async () => {
    const before = await metricValue('integration_consumer_retry_total', { outcome: 'unknown' });
    const { id, outcome } = await handle('unknown', { payload: { token: 'secret-payload-value' } });
    expect(outcome).toBe('retried');
    expect(await eventState(db.pool, id)).toMatchObject({ state: 'QUEUED', failures: 1, error_class: 'RangeError' });
    expect(await metricValue('integration_consumer_retry_total', { outcome: 'unknown' })).toBe(before + 1);

    const line = logs.lines().find((entry) => entry.event_id === id && entry.msg === 'attempt failed');
    expect(line).toMatchObject({ kind: 'unknown', error_class: 'RangeError', attempt: 1 });
    const causes = line?.causes as Array<{ type: string; frames: string[] }>;
    expect(causes.map((cause) => cause.type)).toEqual(['Error', 'RangeError']);
    expect(causes[0]?.frames[0]).toMatch(/^test\/worker\/classification\.test\.ts:\d+$/);
    expect(logs.text()).not.toContain('secret-message-value');
    expect(logs.text()).not.toContain('secret-payload-value');
    expect(logs.text()).not.toContain('Maximum call stack');
  });

  it('WH410 (erased while running) is dropped erased-during-processing, with no retry', async () => {
    const before = await metricValue('integration_consumer_dropped_total', { reason: 'erased-during-processing' });
    const { id, outcome } = await handle('erase-me', { provider: 'github', payload: { sender: { id: 4242, login: 'gone' } } });
    expect(outcome).toBe('dropped');
    expect(await eventState(db.pool, id)).toBeUndefined();
    expect(await metricValue('integration_consumer_dropped_total', { reason: 'erased-during-processing' })).toBe(before + 1);
  });

  it('WH412 (lease taken) writes nothing and counts a lost lease', async () => {
    const before = await metricValue('integration_consumer_lease_lost_total');
    const { id, outcome } = await handle('lease-stolen');
    expect(outcome).toBe('lease-lost');
    // Still leased under the new holder's epoch, untouched by this worker.
    expect(await eventState(db.pool, id)).toMatchObject({ state: 'LEASED', failures: 0, error_class: null, lease_epoch: '2' });
    expect(await metricValue('integration_consumer_lease_lost_total')).toBe(before + 1);
  });

  it('a busy fence (55P03) retries the transaction in order without using the budget', async () => {
    const before = await metricValue('integration_consumer_retry_total', { outcome: 'retried' });
    const { id, outcome } = await handle('busy-fence');
    expect(outcome).toBe('handled');
    expect(await eventState(db.pool, id)).toMatchObject({ state: 'DONE', failures: 0, attempt: 1 });
    const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM busy_step_ran WHERE event_id = $1', [id]);
    expect(rows[0].n).toBe(1);
    expect(await metricValue('integration_consumer_retry_total', { outcome: 'retried' })).toBeGreaterThan(before);
  });
});
