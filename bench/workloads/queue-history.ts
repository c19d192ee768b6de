// Workload 6: the console's queue history at scale (issue 32). A thousand
// workspaces handled a million events within the last hour between them;
// how long does `wharf.queue_history(<one workspace>, 1)` take for one
// ordinary workspace, and how many rows does it read? Its cost must follow
// that workspace's own traffic, not everyone's: the rows read are printed
// against the workspace's own rows and against the window's rows of all
// workspaces.
//
// The inbox is filled by set-based INSERT … SELECT straight into
// wharf.provider_event as the table's owner (the bench connects as one),
// not through admit and the worker: a million admissions and drains would
// take the machine for many minutes and add nothing the query reads. The
// rows are shaped as the lease path leaves them: DONE with handled_at and
// outcome, one in about 1,001 DEAD with dead_at (the table's CHECK wants
// dead_at exactly on DEAD rows), and two per workspace still QUEUED, just
// arrived. Ids follow arrival time and workspaces take turns, as in a shared
// inbox: one workspace's rows lie one to a heap page among everyone else's,
// the case where reading "only its own rows" is worth checking.
import type pg from 'pg';
import { withBenchDatabase, type BenchDatabase } from '../databases.js';
import type { BenchResults, Log } from '../results.js';
import type { BenchSettings } from '../settings.js';
import { summarize } from '../stats.js';
import { githubSource } from '../systems/wharf-inbox.js';

/** One DEAD row in this many, interleaved with the DONE ones. */
const deadStride = 1_001;
/** Rows still waiting per workspace at the end of the window. */
const queuedPerWorkspace = 2;
/** Repositories per workspace: each is a scope of its own. */
const subjectsPerWorkspace = 20;
/** The arrivals spread over this many seconds before the load; the window is the last hour, leaving the load time to spare. */
const spreadSeconds = 50 * 60;
/** Unmeasured calls first: PL/pgSQL plans the function's query and switches to its cached plan after five calls. */
const warmUpCalls = 6;
const batchRows = 100_000;

export interface QueueHistoryLoad {
  workspaces: number;
  /** Rows handled (DONE) in the window, across every workspace. */
  done: number;
  dead: number;
  queued: number;
}

/**
 * The rows read by the plan of the call's query (auto_explain's JSON): rows
 * each scan of provider_event returned plus those its filter removed, over
 * all its loops, and the shared buffers the statement touched.
 */
export interface PlanReads {
  rowsRead: number;
  buffers: number;
}

interface PlanNode {
  'Relation Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  Plans?: PlanNode[];
}

/** Sums the provider_event scans of an EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) plan. */
export function planReads(plan: PlanNode): PlanReads {
  let rowsRead = 0;
  const walk = (node: PlanNode) => {
    if (node['Relation Name'] === 'provider_event') {
      const loops = node['Actual Loops'] ?? 1;
      // EXPLAIN gives rows and removed rows per loop.
      rowsRead += ((node['Actual Rows'] ?? 0) + (node['Rows Removed by Filter'] ?? 0)
        + (node['Rows Removed by Index Recheck'] ?? 0)) * loops;
    }
    for (const child of node.Plans ?? []) walk(child);
  };
  walk(plan);
  // The top node's buffers include its children's.
  return { rowsRead, buffers: (plan['Shared Hit Blocks'] ?? 0) + (plan['Shared Read Blocks'] ?? 0) };
}

async function loadWorkspaces(pool: pg.Pool, workspaces: number): Promise<void> {
  await pool.query('SELECT wharf.upsert_workspace(w) FROM generate_series(1, $1::int) w', [workspaces]);
  // One GitHub App installation per workspace, the connection that admitted its rows.
  await pool.query(
    `SELECT wharf.upsert_connection(w, 'github', $1, 'app_installation', 'qh-' || w) FROM generate_series(1, $2::int) w`,
    [githubSource, workspaces]);
}

/**
 * Rows n = first … last of the handled part: arrival spread evenly over the
 * spread before `anchor`, workspace 1 + n mod W, handled 50 ms to 2 s after
 * its claim, which came 5 to 50 ms after its arrival; every 1,001st DEAD.
 */
async function loadHandled(pool: pg.Pool, workspaces: number, total: number, first: number, last: number, anchor: Date): Promise<void> {
  await pool.query(
    `INSERT INTO wharf.provider_event
       (workspace_id, provider, delivery_key, event_type, subject, scope_key, source, connection_id, payload,
        received_at, next_attempt_at, state, attempt, lease_epoch, leased_at, leased_by, outcome, handled_at,
        failures, error_class, dead_at)
     SELECT r.workspace_id, 'github', 'qh-' || r.n, 'push', r.subject, r.workspace_id || ':github:' || r.subject,
            $1, c.id, jsonb_build_object('ref', 'refs/heads/main', 'after', md5(r.n::text)),
            r.received_at, r.received_at,
            CASE WHEN r.dead THEN 'DEAD' ELSE 'DONE' END, 1, 1, r.leased_at, 'bench-worker',
            CASE WHEN r.dead THEN NULL ELSE 'handled' END,
            CASE WHEN r.dead THEN NULL ELSE r.ended_at END,
            0, CASE WHEN r.dead THEN 'PayloadParseError' END,
            CASE WHEN r.dead THEN r.ended_at END
       FROM generate_series($2::bigint, $3::bigint) AS g(n)
       CROSS JOIN LATERAL (
         SELECT g.n, 1 + g.n % $4 AS workspace_id, 'repo:acme/r' || (g.n / $4) % $5 AS subject,
                g.n % $6 = $6 - 1 AS dead,
                $7::timestamptz - make_interval(secs => $8 * (1 - g.n::float8 / $9)) AS received_at
       ) AS a
       CROSS JOIN LATERAL (
         SELECT a.*, a.received_at + make_interval(secs => 0.005 + random() * 0.045) AS leased_at
       ) AS l
       CROSS JOIN LATERAL (
         SELECT l.*, l.leased_at + make_interval(secs => 0.05 + random() * 1.95) AS ended_at
       ) AS r
       JOIN wharf.connection c ON c.workspace_id = r.workspace_id
      ORDER BY r.n`,
    [githubSource, first, last, workspaces, subjectsPerWorkspace, deadStride, anchor, spreadSeconds, total]);
}

/** Two rows per workspace admitted in the last seconds and not claimed yet (the scope trigger heads their scopes). */
async function loadQueued(pool: pg.Pool, workspaces: number, anchor: Date): Promise<void> {
  await pool.query(
    `INSERT INTO wharf.provider_event
       (workspace_id, provider, delivery_key, event_type, subject, scope_key, source, connection_id, payload,
        received_at, next_attempt_at)
     SELECT c.workspace_id, 'github', 'qh-queued-' || c.workspace_id || '-' || k, 'push', 'repo:acme/r' || k,
            c.workspace_id || ':github:repo:acme/r' || k, $1, c.id,
            jsonb_build_object('ref', 'refs/heads/main', 'after', md5(c.workspace_id || '-' || k)),
            $2::timestamptz - make_interval(secs => 10 - k), $2::timestamptz - make_interval(secs => 10 - k)
       FROM wharf.connection c, generate_series(1, $3::int) AS k
      ORDER BY k, c.workspace_id`,
    [githubSource, anchor, queuedPerWorkspace]);
}

async function loadInbox(settings: BenchSettings, db: BenchDatabase, log: Log): Promise<QueueHistoryLoad> {
  const workspaces = settings.queueHistoryWorkspaces;
  const began = performance.now();
  await loadWorkspaces(db.pool, workspaces);
  // Enough rows that, with one in deadStride DEAD, queueHistoryRows of them are DONE.
  const total = settings.queueHistoryRows + Math.floor(settings.queueHistoryRows / (deadStride - 1));
  const anchor = new Date();
  for (let first = 0; first < total; first += batchRows) {
    await loadHandled(db.pool, workspaces, total, first, Math.min(first + batchRows, total) - 1, anchor);
  }
  await loadQueued(db.pool, workspaces, anchor);
  // As autovacuum would have left a table that has been running for an
  // hour: statistics for the planner, hint bits set, the visibility map current.
  await db.pool.query('VACUUM (ANALYZE) wharf.provider_event, wharf.scope');
  const { rows } = await db.pool.query<{ state: string; n: string }>(
    'SELECT state, count(*) AS n FROM wharf.provider_event GROUP BY state');
  const count = (state: string) => Number(rows.find((row) => row.state === state)?.n ?? 0);
  const load = { workspaces, done: count('DONE'), dead: count('DEAD'), queued: count('QUEUED') };
  log(`queue history: loaded ${load.done} DONE, ${load.dead} DEAD and ${load.queued} QUEUED rows over ` +
      `${workspaces} workspaces in ${((performance.now() - began) / 1000).toFixed(1)} s`);
  return load;
}

const historyCall = 'SELECT wharf.queue_history($1, 1) AS history';

/** Handled rows of `workspace` that the history reports for the window. */
function handledInHistory(history: unknown): number {
  return Array.isArray(history)
    ? history.reduce<number>((sum, minute) => sum + Number((minute as { handled?: unknown }).handled ?? 0), 0)
    : 0;
}

/**
 * The plan of the call's query as the function runs it, through auto_explain
 * (log_nested_statements) with ANALYZE and BUFFERS, in JSON for the figures
 * and in text for the results. Undefined where auto_explain cannot be loaded
 * (it needs a superuser).
 */
async function historyPlan(client: pg.Client, workspace: number): Promise<{ reads: PlanReads; text: string } | undefined> {
  const notices: string[] = [];
  const listener = (notice: { message?: string }) => notices.push(notice.message ?? '');
  client.on('notice', listener);
  try {
    try {
      await client.query(`LOAD 'auto_explain'`);
    } catch {
      return undefined;
    }
    const explain = async (format: 'json' | 'text') => {
      await client.query(`SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on;
                          SET auto_explain.log_buffers = on; SET auto_explain.log_nested_statements = on;
                          SET auto_explain.log_level = notice; SET auto_explain.log_format = '${format}'`);
      notices.length = 0;
      try {
        await client.query(historyCall, [workspace]);
      } finally {
        await client.query('SET auto_explain.log_min_duration = -1');
      }
      // The function's statement that reads the inbox, not require_workspace's nor the outer call.
      return notices.find((notice) => notice.includes('provider_event') && !notice.includes('queue_history($1'));
    };
    const json = await explain('json');
    const text = await explain('text');
    if (!json || !text) return undefined;
    const parsed = JSON.parse(json.slice(json.indexOf('{'))) as { Plan: PlanNode };
    // The notice repeats the statement's text (the function's source) before its plan's first node.
    return { reads: planReads(parsed.Plan), text: text.slice(Math.max(0, text.search(/^\S[^\n]*\(cost=/m))) };
  } finally {
    client.off('notice', listener);
  }
}

export async function runQueueHistory(settings: BenchSettings, results: BenchResults, log: Log): Promise<void> {
  await withBenchDatabase(settings.serverUrl, 'queue_history', { wharf: true, poolSize: 2 }, async (db) => {
    const load = await loadInbox(settings, db, log);
    // An ordinary workspace: workspaces take turns, so each has the same share.
    const workspace = Math.max(1, Math.ceil(load.workspaces / 2));
    const scale = `one workspace of ${load.workspaces.toLocaleString('en-US')}, ` +
      `${load.done.toLocaleString('en-US')} rows handled in the window`;
    const client = await db.connect();
    try {
      let own = 0;
      for (let call = 0; call < warmUpCalls; call += 1) {
        const { rows } = await client.query<{ history: unknown }>(historyCall, [workspace]);
        own = handledInHistory(rows[0]?.history);
      }
      for (let rep = 1; rep <= settings.repetitions; rep += 1) {
        const times: number[] = [];
        for (let call = 0; call < settings.queueHistoryCalls; call += 1) {
          const began = performance.now();
          await client.query(historyCall, [workspace]);
          times.push(performance.now() - began);
        }
        const median = summarize(times).median;
        results.add('queue-history', 'queue_history.time', `wharf.queue_history(${scale}, 1 hour), median of ` +
          `${settings.queueHistoryCalls} warm calls`, 'ms', median);
        log(`queue history, repetition ${rep}/${settings.repetitions}: ${median.toFixed(2)} ms (median of ` +
            `${settings.queueHistoryCalls} calls; ${scale})`);
      }
      results.add('queue-history', 'queue_history.own_rows', "the workspace's rows handled in the window (its history's sum)", 'rows', own);
      results.add('queue-history', 'queue_history.window_rows', 'rows handled in the window, all workspaces', 'rows', load.done);
      results.add('queue-history', 'queue_history.workspaces', 'workspaces with rows in the window', 'workspaces', load.workspaces);
      const plan = await historyPlan(client, workspace);
      if (plan) {
        results.add('queue-history', 'queue_history.rows_read', 'rows of provider_event the call read (EXPLAIN ANALYZE)', 'rows',
          plan.reads.rowsRead);
        results.add('queue-history', 'queue_history.buffers', 'shared buffers the call touched (EXPLAIN BUFFERS)', 'buffers',
          plan.reads.buffers);
        results.evidence.push({ title: `the plan of wharf.queue_history with ${scale} (auto_explain)`, text: plan.text });
        log(`  read ${plan.reads.rowsRead} rows (${(plan.reads.rowsRead / Math.max(1, own)).toFixed(2)}× its own ${own}, ` +
            `${((100 * plan.reads.rowsRead) / Math.max(1, load.done)).toFixed(2)} % of the window's ${load.done}), ` +
            `${plan.reads.buffers} buffers`);
      } else {
        results.note('queue history: auto_explain could not be loaded, so the rows the call read are not reported');
      }
    } finally {
      await client.end();
    }
  });
}
