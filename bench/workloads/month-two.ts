// Workload 7: month two in production (issue 40). Two inboxes on the same
// server, each in a database of its own made from the migrated template: a
// SMALL one of monthTwoSmallRows handled rows, and a LARGE one as a team has
// it after some months: monthTwoRows handled (DONE) rows over many scopes and
// a few workspaces, monthTwoRefusals refusals in admission_log dated 400 days
// ago, and monthTwoUnhandledHeads due QUEUED heads, each in a scope of its
// own, of an event type the claiming host does not handle (a rolling
// deploy's old host). The statements on a hot or periodic path are timed on
// both, side by side, the two inboxes taking turns within each repetition:
// their cost must not follow the inbox's size. Then, on LARGE, whose handled
// rows are all past the replay window, the purge as the worker's retention
// loop runs it: its longest transaction, and the p99 of admits on another
// connection while it runs against their p99 without it.
//
// The inboxes are filled set-based, INSERT … SELECT over generate_series, as
// the table's owner (the bench connects as one), like the queue-history
// workload: the handled rows shaped as the lease path leaves them (DONE, one
// attempt, outcome and handled_at), arrived over the 26 days before the
// replay window; the queued heads inserted through the scope trigger
// (sql/20-scope-heads.sql), which makes their scope rows exactly as an
// admission would. Every call timed here is the one its caller makes: the
// worker's claimEvents, completeEvents, readQueueStats and
// purgeExpiredEvents, the console's listEvents with its page size, admit and
// admit_many as the edge calls them (without a body digest, as for a provider
// that signs more than the body: the delivery key is then the only
// duplicate check).
import type pg from 'pg';
import { pageSize } from '../../operator/console/filters.js';
import { listEvents } from '../../operator/sql/operator.js';
import { claimEvents, completeEvents, readQueueStats } from '../../worker/sql/claim-lease.js';
import { purgeExpiredEvents } from '../../worker/sql/replay-retention.js';
import { createBenchDatabase, type BenchDatabase } from '../databases.js';
import { monthTwoFigures, type MonthTwoFigure } from '../goals.js';
import { makePayload } from '../payload.js';
import type { BenchResults, Log } from '../results.js';
import type { BenchSettings } from '../settings.js';
import { latencySummary, summarize } from '../stats.js';
import { githubSource } from '../systems/wharf-inbox.js';

/** "A few workspaces": the handled rows take turns among them. */
const workspaces = 4;
/** Repositories per workspace that the handled rows arrived on, each a scope; every workspace's installation subscribes to its own. */
const subjectsPerWorkspace = 2_500;
/** The handled rows arrived over this many days, ending a day before the replay window begins. */
const spreadDays = 26;
/** The workspace whose deliveries are admitted and whose events page is read: its installation is '1'. */
const workspace = 1;
const installationRoute = { installation_id: String(workspace) };
/** New deliveries (and the repeated ones' receipts) go to one scope of their own: one more unhandled head in either inbox. */
const newSubject = `repo:ws${workspace}/new`;
/** The handled type the claiming host takes; every other row is 'push'. */
const handledType = 'issues';
const claimHandles = [`github:${handledType}`];
/** Untimed calls first: PL/pgSQL plans a function's statements and switches to a cached plan after five calls. */
const warmUpCalls = 6;
const batchRows = 100_000;
/** Deliveries sent again: one through admit, the rest through one admit_many. */
const repeatedDeliveries = 33;
/** A guard for a purge that never says it is done. */
const maxPurgeCalls = 10_000;

type Size = 'small' | 'large';

interface InboxShape {
  rows: number;
  refusals: number;
  unhandledHeads: number;
}

interface Inbox {
  size: Size;
  shape: InboxShape;
  db: BenchDatabase;
  /** The connection every statement is timed on. */
  client: pg.Client;
  /** Handled deliveries of the workspace that are sent again. */
  repeated: { key: string; subject: string }[];
  /** Ids of the rows the repeated deliveries are duplicates of, in order. */
  repeatedIds: string[];
  seq: number;
}

/** The subject of handled row g: workspace 1 + g mod 4, its repositories in turn. */
const handledWorkspace = (g: number) => 1 + (g % workspaces);
const handledSubject = (g: number) => `repo:ws${handledWorkspace(g)}/r${Math.floor(g / workspaces) % subjectsPerWorkspace}`;

async function loadWorkspaces(pool: pg.Pool): Promise<void> {
  await pool.query('SELECT wharf.upsert_workspace(w) FROM generate_series(1, $1::int) w', [workspaces]);
  await pool.query(
    `SELECT wharf.upsert_connection(w, 'github', $1, 'app_installation', w::text) FROM generate_series(1, $2::int) w`,
    [githubSource, workspaces]);
  await pool.query(
    `SELECT wharf.subscribe(c.id, 'repo:ws' || c.workspace_id || '/r' || k)
       FROM wharf.connection c, generate_series(0, $1::int - 1) k`,
    [subjectsPerWorkspace]);
  await pool.query(
    `SELECT wharf.subscribe(c.id, s) FROM wharf.connection c, unnest($2::text[]) s WHERE c.workspace_id = $1`,
    [workspace, [newSubject, `repo:ws${workspace}/${handledType}`]]);
}

/** Handled rows first … last of total: DONE, arrived evenly over the spread before the replay window, handled 120 ms later. */
async function loadHandled(pool: pg.Pool, total: number, first: number, last: number): Promise<void> {
  await pool.query(
    `INSERT INTO wharf.provider_event
       (workspace_id, provider, delivery_key, event_type, subject, scope_key, source, connection_id, payload,
        received_at, next_attempt_at, state, attempt, lease_epoch, leased_at, leased_by, outcome, handled_at)
     SELECT a.w, 'github', 'md2-' || g, 'push', a.subject, a.w || ':github:' || a.subject, $1, c.id,
            jsonb_build_object('ref', 'refs/heads/main', 'after', md5(g::text)),
            a.received_at, a.received_at, 'DONE', 1, 1, a.received_at + interval '20 ms', 'bench-worker',
            'handled', a.received_at + interval '120 ms'
       FROM generate_series($2::bigint, $3::bigint) AS g
       CROSS JOIN LATERAL (
         SELECT 1 + g % $4 AS w, 'repo:ws' || (1 + g % $4) || '/r' || (g / $4) % $5 AS subject,
                now() - wharf.setting_interval('replay_window') - interval '1 day'
                  - make_interval(days => $6) * (1 - g::float8 / $7) AS received_at
       ) AS a
       JOIN wharf.connection c ON c.workspace_id = a.w
      ORDER BY g`,
    [githubSource, first, last, workspaces, subjectsPerWorkspace, spreadDays, total]);
}

/**
 * Due heads of a type nobody here handles, each in a scope of its own, the
 * workspaces taking turns. Inserted QUEUED, so the scope trigger heads each
 * scope as admission would (sql/20-scope-heads.sql).
 */
async function loadUnhandledHeads(pool: pg.Pool, heads: number): Promise<void> {
  await pool.query(
    `INSERT INTO wharf.provider_event
       (workspace_id, provider, delivery_key, event_type, subject, scope_key, source, connection_id, payload)
     SELECT c.workspace_id, 'github', 'md2-unhandled-' || g, 'push', s.subject,
            c.workspace_id || ':github:' || s.subject, $1, c.id, jsonb_build_object('ref', 'refs/heads/main')
       FROM generate_series(0, $2::int - 1) AS g
       JOIN wharf.connection c ON c.workspace_id = 1 + g % $3
       CROSS JOIN LATERAL (SELECT 'repo:ws' || c.workspace_id || '/unhandled-' || g AS subject) AS s
      ORDER BY g`,
    [githubSource, heads, workspaces]);
}

/** Deliveries refused 400 days ago (no subscriber: the drop names the source connection), a second apart. */
async function loadRefusals(pool: pg.Pool, refusals: number): Promise<void> {
  await pool.query(
    `INSERT INTO wharf.admission_log (at, provider, source, delivery_key, connection_id, workspace_id, reason)
     SELECT now() - interval '400 days' + make_interval(secs => g), 'github', $1, 'md2-refused-' || g, c.id, NULL,
            'no-subscriber'
       FROM generate_series(1, $2::int) AS g
       JOIN wharf.connection c ON c.workspace_id = 1 + g % $3
      ORDER BY g`,
    [githubSource, refusals, workspaces]);
}

async function loadInbox(settings: BenchSettings, size: Size, shape: InboxShape, log: Log): Promise<Inbox> {
  const db = await createBenchDatabase(settings.serverUrl, `month_two_${size}`, { wharf: true, poolSize: 2 });
  try {
    const began = performance.now();
    await loadWorkspaces(db.pool);
    for (let first = 0; first < shape.rows; first += batchRows) {
      await loadHandled(db.pool, shape.rows, first, Math.min(first + batchRows, shape.rows) - 1);
    }
    if (shape.unhandledHeads > 0) await loadUnhandledHeads(db.pool, shape.unhandledHeads);
    if (shape.refusals > 0) await loadRefusals(db.pool, shape.refusals);
    // As autovacuum would have left an inbox in use for months: statistics,
    // hint bits, the visibility map; and the load's WAL flushed now rather
    // than by a checkpoint inside a measurement.
    await db.pool.query('VACUUM (ANALYZE) wharf.provider_event, wharf.scope, wharf.admission_log, wharf.subscription');
    await db.pool.query('CHECKPOINT');

    const { rows: [counts] } = await db.pool.query<{ done: string; heads: string; scopes: string; refusals: string }>(
      `SELECT (SELECT count(*) FROM wharf.provider_event WHERE state = 'DONE') AS done,
              (SELECT count(*) FROM wharf.scope s JOIN wharf.provider_event e ON e.id = s.head_id
                WHERE e.state = 'QUEUED' AND s.leased_id IS NULL AND s.active) AS heads,
              (SELECT count(*) FROM wharf.scope) AS scopes,
              (SELECT count(*) FROM wharf.admission_log) AS refusals`);
    // The scope rows are the trigger's: one claimable head per queued row, nothing else.
    if (Number(counts?.done) !== shape.rows || Number(counts?.heads) !== shape.unhandledHeads
        || Number(counts?.scopes) !== shape.unhandledHeads || Number(counts?.refusals) !== shape.refusals) {
      throw new Error(`month two: the ${size} inbox loaded as ${JSON.stringify(counts)}, not ${JSON.stringify(shape)}`);
    }
    log(`month two: loaded the ${size} inbox (${shape.rows} DONE rows past the replay window, ${shape.unhandledHeads} ` +
        `unhandled heads, ${shape.refusals} old refusals) in ${((performance.now() - began) / 1000).toFixed(1)} s`);

    // Handled rows of the workspace (g ≡ 0 mod 4) from the middle of the inbox, sent again.
    const middle = workspaces * Math.floor((shape.rows - repeatedDeliveries * workspaces) / (2 * workspaces));
    const repeated = Array.from({ length: repeatedDeliveries }, (_, n) => {
      const g = middle + n * workspaces;
      return { key: `md2-${g}`, subject: handledSubject(g) };
    });
    const { rows: ids } = await db.pool.query<{ id: string }>(
      `SELECT e.id FROM unnest($1::text[]) WITH ORDINALITY AS k(key, n)
         JOIN wharf.provider_event e ON e.workspace_id = $2 AND e.provider = 'github' AND e.delivery_key = k.key
        ORDER BY k.n`,
      [repeated.map((delivery) => delivery.key), workspace]);
    if (ids.length !== repeated.length) throw new Error(`month two: the ${size} inbox lacks the deliveries it repeats`);
    return { size, shape, db, client: await db.connect(), repeated, repeatedIds: ids.map((row) => String(row.id)), seq: 0 };
  } catch (error) {
    await db.drop();
    throw error;
  }
}

interface Receipt {
  events: { event_id: string | number; outcome: string }[];
}

const admission = (key: string, eventType: string, subject: string, seq: number) => ({
  provider: 'github', source: githubSource, delivery_key: key, event_type: eventType,
  route: installationRoute, subjects: [subject], payload: makePayload(subject, seq), headers: {},
});

/** wharf.admit of one delivery as the edge calls it; its receipt. */
async function admit(client: pg.Client, delivery: ReturnType<typeof admission>): Promise<Receipt> {
  const { rows } = await client.query<{ receipt: Receipt }>(
    'SELECT wharf.admit($1, $2, $3, $4, $5, $6, $7, $8) AS receipt',
    [delivery.provider, delivery.source, delivery.delivery_key, delivery.event_type, delivery.route, delivery.subjects,
      delivery.payload, delivery.headers]);
  const receipt = rows[0]?.receipt;
  if (!receipt) throw new Error('month two: admit returned no receipt');
  return receipt;
}

function expectOutcome(receipt: Receipt, outcome: 'stored' | 'duplicate', eventId?: string): string {
  const event = receipt.events[0];
  if (receipt.events.length !== 1 || event?.outcome !== outcome || (eventId !== undefined && String(event.event_id) !== eventId)) {
    throw new Error(`month two: expected one ${outcome}${eventId ? ` of ${eventId}` : ''}, got ${JSON.stringify(receipt)}`);
  }
  return String(event.event_id);
}

/** One call of each timed statement, checked; the milliseconds of each figure. */
async function callOnce(inbox: Inbox): Promise<Record<MonthTwoFigure, number>> {
  const { client } = inbox;
  const seq = (inbox.seq += 1);
  const time = async <T>(work: () => Promise<T>): Promise<[T, number]> => {
    const began = performance.now();
    const value = await work();
    return [value, performance.now() - began];
  };
  const [first] = inbox.repeated;
  if (!first) throw new Error('month two: nothing to repeat');

  const [repeatReceipt, admitRepeat] = await time(() =>
    admit(client, admission(first.key, 'push', first.subject, seq)));
  expectOutcome(repeatReceipt, 'duplicate', inbox.repeatedIds[0]);

  const [newReceipt, admitNew] = await time(() =>
    admit(client, admission(`md2-new-${seq}`, 'push', newSubject, seq)));
  expectOutcome(newReceipt, 'stored');

  const batch = inbox.repeated.slice(1).map((delivery) => admission(delivery.key, 'push', delivery.subject, seq));
  const [manyReceipts, admitMany] = await time(async () =>
    (await client.query<{ receipts: Receipt[] }>('SELECT wharf.admit_many($1::jsonb) AS receipts', [JSON.stringify(batch)]))
      .rows[0]?.receipts ?? []);
  if (manyReceipts.length !== batch.length) throw new Error(`month two: admit_many answered ${manyReceipts.length} receipts`);
  manyReceipts.forEach((receipt, n) => expectOutcome(receipt, 'duplicate', inbox.repeatedIds[n + 1]));

  // A fresh event of the type this host handles, in a scope of its own: the
  // claim must pass every due head of the type it does not handle to get it.
  const fresh = expectOutcome(await admit(client, admission(`md2-issue-${seq}`, handledType, `repo:ws${workspace}/${handledType}`, seq)),
    'stored');
  const [claimed, claim] = await time(() => claimEvents(client, 'month-two', 1, claimHandles));
  const lease = claimed[0];
  if (claimed.length !== 1 || lease?.id !== fresh) {
    throw new Error(`month two: claim took ${JSON.stringify(claimed.map((row) => row.id))}, not the fresh event ${fresh}`);
  }
  const [completed, complete] = await time(() =>
    completeEvents(client, [{ id: lease.id, epoch: lease.lease_epoch, outcome: 'handled' }]));
  if (completed[0] !== true) throw new Error(`month two: the lease of ${lease.id} was gone at completion`);

  const [, queueStats] = await time(() => readQueueStats(client));

  const [page, eventsPage] = await time(() => listEvents(client, { workspaceId: String(workspace) }, { limit: pageSize }));
  if (page.events.length !== pageSize) throw new Error(`month two: the first events page held ${page.events.length} events`);

  return {
    admit_repeat: admitRepeat, admit_new: admitNew, admit_many32_repeat: admitMany, claim, complete,
    queue_stats: queueStats, events_page: eventsPage,
  };
}

/**
 * The median of each figure over `calls` calls on each inbox, the inboxes
 * taking turns call by call, `order` first: a drift of the machine's load
 * falls on both.
 */
async function measure(order: Inbox[], calls: number): Promise<Map<Size, Record<MonthTwoFigure, number>>> {
  const samples = new Map<string, number[]>();
  for (let call = 0; call < calls; call += 1) {
    for (const inbox of order) {
      for (const [figure, ms] of Object.entries(await callOnce(inbox))) {
        const key = `${inbox.size}.${figure}`;
        samples.set(key, [...(samples.get(key) ?? []), ms]);
      }
    }
  }
  return new Map(order.map((inbox) => [inbox.size, Object.fromEntries(monthTwoFigures.map(({ id }) =>
    [id, summarize(samples.get(`${inbox.size}.${id}`) ?? []).median])) as Record<MonthTwoFigure, number>]));
}

const describeInbox = (inbox: Inbox) => inbox.size === 'small'
  ? `${inbox.shape.rows.toLocaleString('en-US')} rows`
  : `${inbox.shape.rows.toLocaleString('en-US')} rows, ${inbox.shape.unhandledHeads.toLocaleString('en-US')} unhandled heads`;

async function sideBySide(settings: BenchSettings, results: BenchResults, log: Log, small: Inbox, large: Inbox): Promise<void> {
  for (const inbox of [small, large]) {
    for (let call = 0; call < warmUpCalls; call += 1) await callOnce(inbox);
  }
  for (let rep = 1; rep <= settings.repetitions; rep += 1) {
    // The one that goes first changes each repetition.
    const medians = await measure(rep % 2 === 1 ? [small, large] : [large, small], settings.monthTwoCalls);
    for (const { id, label } of monthTwoFigures) {
      for (const inbox of [small, large]) {
        results.add('month-two', `month_two.${id}.${inbox.size}`, `${label}: ${inbox.size} inbox (${describeInbox(inbox)})`,
          'ms', medians.get(inbox.size)?.[id] ?? Number.NaN);
      }
    }
    log(`month two, repetition ${rep}/${settings.repetitions}: ` + monthTwoFigures.map(({ id }) => {
      const [s, l] = [medians.get('small')?.[id] ?? Number.NaN, medians.get('large')?.[id] ?? Number.NaN];
      return `${id} ${s.toFixed(2)} → ${l.toFixed(2)} ms (${(l / s).toFixed(2)}×)`;
    }).join(', '));
  }
}

/** Admits new deliveries one after another on `client` while `going()`; their latencies in ms. */
async function admitWhile(inbox: Inbox, client: pg.Client, going: (count: number) => boolean): Promise<number[]> {
  const latencies: number[] = [];
  while (going(latencies.length)) {
    const seq = (inbox.seq += 1);
    const began = performance.now();
    expectOutcome(await admit(client, admission(`md2-beside-${seq}`, 'push', newSubject, seq)), 'stored');
    latencies.push(performance.now() - began);
  }
  return latencies;
}

/**
 * What one purge call reported doing: the sum of its counts. The retention
 * loop repeats a batched purge until a call does nothing; a purge in one
 * transaction does it all in its first call and nothing in its second.
 */
function reportedWork(result: object): number {
  return Object.values(result).reduce<number>((sum, value) => sum + (typeof value === 'number' ? value : 0), 0);
}

/**
 * `client` with every transaction it runs timed into `spans` (ms): from a
 * BEGIN sent to its COMMIT or ROLLBACK answered, and each statement outside
 * one (a transaction of its own). So the longest transaction is known
 * whether purgeExpiredEvents runs one transaction a call or loops over
 * batches inside one call.
 */
function timingTransactions(client: pg.Client, spans: number[]): pg.Client {
  let begun: number | undefined;
  const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
  const timed = async (...args: unknown[]) => {
    const first = args[0];
    const text = typeof first === 'string' ? first : (first as { text?: string } | undefined)?.text ?? '';
    const began = performance.now();
    if (/^\s*(BEGIN|START TRANSACTION)\b/i.test(text)) begun = began;
    try {
      return await query(...args);
    } finally {
      if (/^\s*(COMMIT|ROLLBACK|END)\b/i.test(text) && begun !== undefined) {
        spans.push(performance.now() - begun);
        begun = undefined;
      } else if (begun === undefined) {
        spans.push(performance.now() - began);
      }
    }
  };
  return new Proxy(client, { get: (target, key, receiver) => key === 'query' ? timed : Reflect.get(target, key, receiver) as unknown });
}

async function purgeBesideAdmits(settings: BenchSettings, results: BenchResults, log: Log, large: Inbox): Promise<void> {
  const admitter = await large.db.connect();
  const purger = await large.db.connect();
  try {
    const count = async (sql: string) => Number((await large.db.pool.query<{ n: string }>(sql)).rows[0]?.n);
    const expiredSql = `SELECT count(*) AS n FROM wharf.provider_event
                         WHERE state = 'DONE' AND handled_at < now() - wharf.setting_interval('replay_window')`;
    const oldRefusalsSql = `SELECT count(*) AS n FROM wharf.admission_log WHERE at < now() - interval '399 days'`;
    const expired = await count(expiredSql);
    const oldRefusals = await count(oldRefusalsSql);

    await admitWhile(large, admitter, (n) => n < warmUpCalls);
    const quiet = latencySummary(await admitWhile(large, admitter, (n) => n < settings.monthTwoQuietAdmits));

    let purging = true;
    const beside = admitWhile(large, admitter, () => purging);
    const calls: number[] = [];
    const transactions: number[] = [];
    const timedPurger = timingTransactions(purger, transactions);
    const began = performance.now();
    try {
      for (;;) {
        if (calls.length >= maxPurgeCalls) throw new Error(`month two: the purge was not done after ${maxPurgeCalls} calls`);
        const callBegan = performance.now();
        const result = await purgeExpiredEvents(timedPurger);
        calls.push(performance.now() - callBegan);
        if (!result.purged) throw new Error('month two: another session held the retention lock');
        if (reportedWork(result) === 0) break;
      }
    } finally {
      purging = false;
    }
    const total = performance.now() - began;
    const besideLatencies = latencySummary(await beside);
    const expiredLeft = await count(expiredSql);
    const refusalsLeft = await count(oldRefusalsSql);

    const longest = Math.max(...transactions);
    const scale = `${large.shape.rows.toLocaleString('en-US')} rows past the replay window`;
    results.add('month-two', 'month_two.purge.longest', `purge: the longest transaction of the retention loop (${scale})`, 'ms',
      longest);
    results.add('month-two', 'month_two.purge.longest_call', 'purge: the longest call of purgeExpiredEvents', 'ms', Math.max(...calls));
    results.add('month-two', 'month_two.purge.calls', 'purge: calls until one did nothing', 'calls', calls.length);
    results.add('month-two', 'month_two.purge.transactions', 'purge: transactions of those calls', 'transactions', transactions.length);
    results.add('month-two', 'month_two.purge.total', 'purge: the loop from its first call to its last', 'ms', total);
    results.add('month-two', 'month_two.purge.events_deleted', 'purge: event rows past the replay window deleted', 'rows',
      expired - expiredLeft);
    results.add('month-two', 'month_two.admit_p99.quiet', `admit, new delivery: p99 of ${quiet.count} in a row, no purge`,
      'ms', quiet.p99);
    results.add('month-two', 'month_two.admit_p99.beside_purge', 'admit, new delivery: p99 of those in a row on another ' +
      'connection while the loop purged', 'ms', besideLatencies.p99);
    results.add('month-two', 'month_two.admits_beside_purge', 'admits made while the loop purged', 'admits',
      besideLatencies.count);
    results.add('month-two', 'month_two.old_refusals', 'admission_log refusals dated 400 days ago, before the purge', 'rows', oldRefusals);
    results.add('month-two', 'month_two.old_refusals_left', 'admission_log refusals dated 400 days ago, left after it', 'rows', refusalsLeft);
    if (expiredLeft > 0) results.note(`month two: the retention loop left ${expiredLeft} of ${expired} DONE rows past the replay window`);
    if (besideLatencies.count < 100) {
      results.note(`month two: only ${besideLatencies.count} admits ran beside the purge; their p99 is nearly their maximum`);
    }
    log(`month two: purge of ${scale}: ${calls.length} calls, ${transactions.length} transactions in ${total.toFixed(0)} ms, ` +
        `the longest ${longest.toFixed(0)} ms, ` +
        `${expired - expiredLeft} of ${expired} expired rows deleted, ${refusalsLeft} of ${oldRefusals} old refusals left; ` +
        `admits' p99 ${besideLatencies.p99.toFixed(2)} ms beside it (${besideLatencies.count}) vs ${quiet.p99.toFixed(2)} ms without`);
  } finally {
    await Promise.all([admitter.end(), purger.end()]);
  }
}

export async function runMonthTwo(settings: BenchSettings, results: BenchResults, log: Log): Promise<void> {
  // The repeated deliveries are the workspace's own handled rows, one in four.
  const fewest = repeatedDeliveries * workspaces;
  if (settings.monthTwoSmallRows < fewest || settings.monthTwoRows < fewest) {
    throw new Error(`month two: each inbox needs at least ${fewest} handled rows`);
  }
  const small = await loadInbox(settings, 'small', { rows: settings.monthTwoSmallRows, refusals: 0, unhandledHeads: 0 }, log);
  try {
    const large = await loadInbox(settings, 'large', {
      rows: settings.monthTwoRows, refusals: settings.monthTwoRefusals, unhandledHeads: settings.monthTwoUnhandledHeads,
    }, log);
    try {
      results.add('month-two', 'month_two.small_rows', 'handled rows in the small inbox', 'rows', small.shape.rows);
      results.add('month-two', 'month_two.large_rows', 'handled rows in the large inbox', 'rows', large.shape.rows);
      await sideBySide(settings, results, log, small, large);
      await purgeBesideAdmits(settings, results, log, large);
    } finally {
      await large.client.end().catch(() => {});
      await large.db.drop();
    }
  } finally {
    await small.client.end().catch(() => {});
    await small.db.drop();
  }
}
