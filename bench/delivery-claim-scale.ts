// What a forwarder's claim costs as the destination's queue grows: the time
// of claim_deliveries(50) and next_delivery_at() on a small queue and on large
// ones, in the same run, as ratios. Each claim runs in a transaction that is
// rolled back, so every sample sees the same rows.
//
//   npx tsx bench/delivery-claim-scale.ts [server url]
//
// Shapes, each an ordered destination in a database of its own, built
// set-based (the deliveries are inserted as routing would leave them: the
// first of each (destination, scope) due, the rest waiting behind it):
//   small      1,000 deliveries over 100 scopes
//   large      1,000,000 deliveries over 1,000 scopes
//   stuck      200,000 deliveries behind one head that waits for its retry,
//              beside 1,000 deliveries over 100 scopes (the incident: one
//              payload an endpoint keeps refusing)
import { withBenchDatabase, type BenchDatabase } from './databases.js';
import { summarize } from './stats.js';

const serverUrl = process.argv[2] ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const samples = 30;

interface Shape { name: string; stuck: number; rest: number; scopes: number }
const shapes: Shape[] = [
  { name: 'small', stuck: 0, rest: 1_000, scopes: 100 },
  { name: 'large', stuck: 0, rest: 1_000_000, scopes: 1_000 },
  { name: 'stuck', stuck: 200_000, rest: 1_000, scopes: 100 },
];

async function build(db: BenchDatabase, shape: Shape): Promise<void> {
  await db.pool.query(`SELECT wharf.upsert_workspace(1)`);
  await db.pool.query(`SELECT wharf.upsert_connection(1, 'generic', 'https://hooks.example/1', 'webhook', 'one')`);
  await db.pool.query(`SELECT wharf.create_destination(1, '{"name": "app", "url": "https://app.example/hook", "max_in_flight": 1000}')`);
  await db.pool.query(`SELECT wharf.set_destination_secret(1, 1, 'aes256gcm:k:iv:sealed')`);
  // The events themselves are the handlers' DONE rows: only the deliveries queue.
  await db.pool.query(`
    INSERT INTO wharf.provider_event (workspace_id, provider, delivery_key, event_type, subject, scope_key, source,
                                      connection_id, payload, headers, state, outcome, handled_at)
    SELECT 1, 'generic', 'k' || g, 'thing', s.subject, '1:generic:' || s.subject, 'https://hooks.example/1', 1,
           '{"n": 1}', '{}', 'DONE', 'forwarded', now()
      FROM generate_series(1, $1::integer + $2::integer) g
      CROSS JOIN LATERAL (SELECT CASE WHEN g <= $1 THEN 'stuck' ELSE 's' || (g % $3) END AS subject) s`,
  [shape.stuck, shape.rest, shape.scopes]);
  await db.pool.query(`
    INSERT INTO wharf.destination_delivery (event_id, destination_id, workspace_id, scope_key, ordered, next_attempt_at)
    SELECT e.id, 1, 1, e.scope_key, true,
           CASE WHEN e.subject = 'stuck' AND e.id = first.id THEN now() + interval '1 hour'
                WHEN e.id = first.id THEN now() ELSE 'infinity' END
      FROM wharf.provider_event e
      JOIN (SELECT scope_key, min(id) AS id FROM wharf.provider_event GROUP BY scope_key) first USING (scope_key)`);
  await db.pool.query(`VACUUM ANALYZE wharf.destination_delivery`);
  await db.pool.query(`VACUUM ANALYZE wharf.provider_event`);
}

async function timeMs(db: BenchDatabase, sql: string): Promise<number[]> {
  const client = await db.pool.connect();
  try {
    const times: number[] = [];
    for (let n = 0; n < samples + 5; n += 1) {
      await client.query('BEGIN');
      const started = process.hrtime.bigint();
      await client.query(sql);
      const elapsed = Number(process.hrtime.bigint() - started) / 1e6;
      await client.query('ROLLBACK');
      if (n >= 5) times.push(elapsed);  // the first calls plan and warm the caches
    }
    return times;
  } finally {
    client.release();
  }
}

const results: { shape: string; claim: number; next: number }[] = [];
for (const shape of shapes) {
  await withBenchDatabase(serverUrl, `claimscale_${shape.name}`, { wharf: true }, async (db) => {
    await build(db, shape);
    const claim = summarize(await timeMs(db, `SELECT count(*) FROM wharf.claim_deliveries('bench', 50)`)).median;
    const next = summarize(await timeMs(db, `SELECT wharf.next_delivery_at()`)).median;
    results.push({ shape: shape.name, claim, next });
  });
}
const small = results[0]!;
for (const result of results) {
  console.log(`${result.shape.padEnd(6)} claim_deliveries(50) ${result.claim.toFixed(2)} ms (${(result.claim / small.claim).toFixed(2)}× small)`
    + `  next_delivery_at ${result.next.toFixed(3)} ms (${(result.next / small.next).toFixed(2)}× small)`);
}
