// Workload 5: does Wharf slow down or bloat as the inbox grows? (a) the
// claim+complete rate with a small and a large backlog over the same scopes;
// (b) relation sizes before, halfway and after a sustained period of admits
// drained as they come.
import type pg from 'pg';
import { withBenchDatabase, type BenchDatabase } from '../databases.js';
import { HandlingTracker } from '../handling-tracker.js';
import type { BenchResults, Log } from '../results.js';
import { withAutovacuum } from '../server-autovacuum.js';
import type { BenchSettings } from '../settings.js';
import { startWharfConsumer } from '../systems/wharf-consumer.js';
import {
  admitPush,
  loadWharfBacklog,
  setupWharfInstallation,
  wharfRelationSizes,
} from '../systems/wharf-inbox.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function queuedCount(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ n: string }>(`SELECT count(*) AS n FROM wharf.provider_event WHERE state = 'QUEUED'`);
  return Number(rows[0]?.n);
}

/** Keeps `rows` queued (topping up what earlier repetitions drained) and times `measured` claims+completes. */
async function measureBacklog(
  settings: BenchSettings,
  db: BenchDatabase,
  connectionId: number,
  rows: number,
  nextSeq: { value: number },
): Promise<number> {
  const missing = rows - (await queuedCount(db.pool));
  if (missing > 0) {
    await loadWharfBacklog(db.pool, connectionId, missing, settings.growthScopes, nextSeq.value);
    nextSeq.value += missing;
  }
  const concurrency = settings.drainConcurrencies[0] ?? 8;
  const tracker = new HandlingTracker();
  const began = performance.now();
  const consumer = await startWharfConsumer(db, concurrency, (mark) => tracker.record(mark.key, mark.seq), (error) => tracker.fail(error));
  try {
    await tracker.waitFor(settings.growthMeasuredEvents, settings.drainTimeoutMs);
  } finally {
    await consumer.stop();
  }
  const counts = tracker.counts();
  if (counts.duplicates > 0 || counts.orderViolations > 0) {
    throw new Error(`growth drain: ${counts.duplicates} duplicates, ${counts.orderViolations} order violations`);
  }
  return counts.handled / ((performance.now() - began) / 1000);
}

/**
 * The plan of claim's head lookup as claim itself runs it, through
 * auto_explain, after enough calls for PL/pgSQL to have cached its plan; in a
 * transaction rolled back, so nothing stays leased. Undefined where
 * auto_explain cannot be loaded (it needs a superuser).
 */
async function claimPlan(db: BenchDatabase): Promise<string | undefined> {
  const client = await db.connect();
  const notices: string[] = [];
  client.on('notice', (notice) => notices.push(notice.message ?? ''));
  try {
    await client.query(`LOAD 'auto_explain'`);
  } catch {
    return undefined;
  }
  await client.query('BEGIN');
  try {
    const claimOne = `SELECT count(*) FROM wharf.claim('bench-explain', 1)`;
    for (let call = 0; call < 6; call += 1) await client.query(claimOne);
    await client.query(`SET LOCAL auto_explain.log_min_duration = 0; SET LOCAL auto_explain.log_analyze = on;
                        SET LOCAL auto_explain.log_buffers = on; SET LOCAL auto_explain.log_nested_statements = on;
                        SET LOCAL auto_explain.log_level = notice`);
    notices.length = 0;
    await client.query(claimOne);
    const plan = notices.find((notice) => notice.includes('due_heads'));
    // The notice repeats the statement's text before its plan.
    return plan?.slice(Math.max(0, plan.indexOf('\nUpdate on') + 1));
  } finally {
    await client.query('ROLLBACK');
  }
}

async function backlogRates(settings: BenchSettings, results: BenchResults, log: Log): Promise<void> {
  const concurrency = settings.drainConcurrencies[0] ?? 8;
  for (const [size, rows] of [['small', settings.growthSmallRows], ['large', settings.growthLargeRows]] as const) {
    await withBenchDatabase(settings.serverUrl, `growth_${size}`, { wharf: true, poolSize: concurrency + 2 }, async (db) => {
      const connectionId = await setupWharfInstallation(db.pool, 0);
      const loadStart = performance.now();
      const nextSeq = { value: 0 };
      await loadWharfBacklog(db.pool, connectionId, rows, settings.growthScopes);
      nextSeq.value = rows;
      log(`growth: loaded ${rows} queued rows over ${settings.growthScopes} scopes in ` +
          `${((performance.now() - loadStart) / 1000).toFixed(1)} s`);
      for (let rep = 1; rep <= settings.repetitions; rep += 1) {
        const rate = await measureBacklog(settings, db, connectionId, rows, nextSeq);
        results.add('growth', `growth.${size}`, `claim+complete with ${rows.toLocaleString('en-US')} queued rows`, 'events/s', rate);
        log(`  ${rows} queued, repetition ${rep}: ${rate.toFixed(0)} claims+completes/s`);
      }
      if (size === 'large') {
        const plan = await claimPlan(db);
        if (plan) results.evidence.push({ title: `the plan claim runs with ${rows.toLocaleString('en-US')} queued rows (auto_explain)`, text: plan });
      }
    });
  }
}

async function snapshot(results: BenchResults, pool: pg.Pool, phase: string): Promise<void> {
  const { rows } = await pool.query<{ rows: string; queued: string }>(
    `SELECT count(*) AS rows, count(*) FILTER (WHERE state = 'QUEUED') AS queued FROM wharf.provider_event`);
  results.sizes.push({
    phase,
    rows: Number(rows[0]?.rows),
    queued: Number(rows[0]?.queued),
    relations: await wharfRelationSizes(pool),
  });
}

/** Admits at `sustainedRate` into 200 scopes while the workers drain, for `sustainedSeconds`. */
async function sustainedLoad(settings: BenchSettings, results: BenchResults, log: Log): Promise<void> {
  const concurrency = settings.drainConcurrencies[0] ?? 8;
  const scopes = settings.orderedScopes;
  const report = (message: string) => {
    log(`  ${message}`);
    results.note(message);
  };
  await withAutovacuum(settings.serverUrl, report, () => withBenchDatabase(settings.serverUrl, 'growth_sustained', { wharf: true, poolSize: concurrency + 6 }, async (db) => {
    const connectionId = await setupWharfInstallation(db.pool, scopes);
    await loadWharfBacklog(db.pool, connectionId, settings.growthSmallRows, scopes);
    await snapshot(results, db.pool, 'before');
    const tracker = new HandlingTracker();
    const consumer = await startWharfConsumer(db, concurrency, (mark) => tracker.record(mark.key, mark.seq), (error) => tracker.fail(error));
    let admitted = 0;
    let handledUnderLoad = 0;
    try {
      const interval = 1000 / settings.sustainedRate;
      const total = Math.round(settings.sustainedRate * settings.sustainedSeconds);
      const began = performance.now();
      let halfway = false;
      // One admission at a time per scope, so seq order is commit (id) order
      // within a scope and the tracker's order check stays exact.
      const lastOfScope = new Map<number, Promise<void>>();
      for (let seq = 0; seq < total; seq += 1) {
        const wait = began + seq * interval - performance.now();
        if (wait > 0) await sleep(wait);
        if (!halfway && seq >= total / 2) {
          halfway = true;
          await snapshot(results, db.pool, 'halfway');
        }
        const scope = seq % scopes;
        const admission = (lastOfScope.get(scope) ?? Promise.resolve())
          .then(() => admitPush(db.pool, `sustained-${seq}`, scope, settings.growthSmallRows + seq))
          .then(() => {
            admitted += 1;
          });
        lastOfScope.set(scope, admission);
      }
      const inFlight = [...lastOfScope.values()];
      await Promise.all(inFlight);
      handledUnderLoad = tracker.counts().handled;
      // Sizes compare at the queue depth of the halfway snapshot: a drain
      // that fell behind holds more queued rows in the queue's indexes,
      // which is backlog, not bloat.
      const halfwayQueued = results.sizes.find((s) => s.phase === 'halfway')?.queued ?? 0;
      const behind = await queuedCount(db.pool);
      const drainBegan = performance.now();
      let queued = behind;
      while (queued > halfwayQueued && performance.now() - drainBegan < settings.drainTimeoutMs) {
        await sleep(200);
        queued = await queuedCount(db.pool);
      }
      if (performance.now() - drainBegan > 1_000) {
        report(`sustained load: ${behind} queued when the admissions ended (${halfwayQueued} halfway); ` +
               `the sizes "after" were taken ${((performance.now() - drainBegan) / 1000).toFixed(1)} s later, ` +
               `with ${queued} queued`);
      }
      await snapshot(results, db.pool, 'after');
    } finally {
      await consumer.stop();
    }
    const counts = tracker.counts();
    log(`growth: sustained ${settings.sustainedSeconds} s at ${settings.sustainedRate}/s: ${admitted} admitted, ` +
        `${handledUnderLoad} handled while admitting, ${counts.handled} in all, ` +
        `${counts.orderViolations} order violations, ${counts.duplicates} duplicates`);
    results.add('growth', 'growth.sustained_handled', `handled during ${settings.sustainedSeconds} s sustained load`,
      'events/s', handledUnderLoad / settings.sustainedSeconds, counts);
  }));
}

export async function runGrowth(settings: BenchSettings, results: BenchResults, log: Log): Promise<void> {
  await backlogRates(settings, results, log);
  await sustainedLoad(settings, results, log);
}
