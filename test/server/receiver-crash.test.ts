// "Nothing is lost" (README): a 202 survives a crash of PostgreSQL. The Node
// receiver (coalescing into admit_many, as in production) answers a stream of
// signed deliveries from several concurrent senders while its PostgreSQL,
// one of the test's own, is crashed with an immediate shutdown (SIGQUIT to
// the postmaster, as `pg_ctl stop -m immediate`: no checkpoint, WAL buffers
// not yet written are lost) and started again (crash recovery). Then every
// event a 202 named is a stored row. The crash comes after a count of 202s,
// never at a time: the stream is mid-flight whatever the machine's speed.
//
// Able to fail: with admission committing asynchronously (the server started
// with synchronous_commit=off and wal_writer_delay=10s, as a
// `set_config('synchronous_commit', 'off', true)` in wharf.admit_many would
// do), 202s answered before the crash name rows that crash recovery does not
// bring back, and the last assertion lists them.
import { Registry } from 'prom-client';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { migrate } from '../../db/migrate.js';
import { startNodeServer, type NodeServer } from '../../server/node.js';
import { edgeEnv, freshId, newDeliveryKey, recorder, scenario, type ProviderScenario } from '../support/edge-fixtures.js';
import { createOwnPostgres, type OwnPostgres } from '../support/own-postgres.js';

const senders = 6;
const deliveriesEach = 80;
/** Crash once this many 202s were answered: about a third of the stream. */
const crashAfterAccepted = Math.floor((senders * deliveriesEach) / 3);

let own: OwnPostgres;
let receiver: NodeServer;
let github: ProviderScenario;

beforeAll(async () => {
  own = await createOwnPostgres();
  await own.start();
  await migrate({ databaseUrl: own.url });
  const pool = new pg.Pool({ connectionString: own.url, max: 2 });
  try {
    github = await scenario(pool, 'github', freshId());
  } finally {
    await pool.end();
  }
  receiver = await startNodeServer({
    databaseUrl: own.url, env: { ...edgeEnv }, registry: new Registry(), logger: recorder().logger,
  });
}, 120_000);

afterAll(async () => {
  await receiver?.close();
  await own?.stop();
}, 60_000);

interface Answer {
  status: number;
  eventIds: number[];
  /** Answered after the crash began. */
  afterCrash: boolean;
}

it('every event a 202 named is stored after PostgreSQL crashed while the receiver answered a stream of deliveries', async () => {
  const answers: Answer[] = [];
  let accepted = 0;
  let crashed: Promise<void> | undefined;
  let crashing = false;

  const send = async (): Promise<Answer> => {
    const deliveryKey = newDeliveryKey();
    const body = JSON.stringify(github.payload(deliveryKey));
    try {
      const response = await fetch(`${receiver.url}${github.path}`, {
        method: 'POST', body, headers: { 'content-type': 'application/json', ...(await github.sign(body, { deliveryKey })) },
      });
      const text = await response.text();
      const json = text ? (JSON.parse(text) as { events?: { event_id: number }[] }) : {};
      return { status: response.status, eventIds: (json.events ?? []).map((event) => event.event_id), afterCrash: crashing };
    } catch {
      // No answer at all (a reset): no promise was made.
      return { status: 0, eventIds: [], afterCrash: crashing };
    }
  };

  const sender = async (): Promise<void> => {
    for (let n = 0; n < deliveriesEach; n += 1) {
      const answer = await send();
      answers.push(answer);
      if (answer.status !== 202) continue;
      accepted += 1;
      if (accepted === crashAfterAccepted) {
        crashing = true;
        // While the other senders' requests are in flight.
        crashed = own.restartImmediate();
      }
    }
  };

  await Promise.all(Array.from({ length: senders }, () => sender()));
  await crashed;
  // The senders may have finished while PostgreSQL was still recovering (their
  // 503s come fast): more deliveries once it is back, until one is accepted or
  // twenty were not, so that whether the receiver accepts again does not
  // depend on how long the recovery took.
  for (let n = 0; n < 20 && !answers.some((a) => a.status === 202 && a.afterCrash); n += 1) answers.push(await send());

  const statuses = new Map<number, number>();
  for (const answer of answers) statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
  const summary = JSON.stringify(Object.fromEntries(statuses));
  // Every answer is a 202 or a documented refusal the provider retries (503), or no answer.
  expect([...statuses.keys()].every((status) => [0, 202, 503].includes(status)), summary).toBe(true);
  // The crash fell inside the stream: 202s on both sides of it.
  expect(answers.filter((a) => a.status === 202 && !a.afterCrash).length, summary).toBeGreaterThanOrEqual(crashAfterAccepted);
  expect(answers.filter((a) => a.status === 202 && a.afterCrash).length, summary).toBeGreaterThan(0);

  const promised = answers.filter((a) => a.status === 202).flatMap((a) => a.eventIds);
  expect(promised.length).toBe(answers.filter((a) => a.status === 202).length);
  const client = new pg.Client({ connectionString: own.url });
  await client.connect();
  try {
    const { rows } = await client.query<{ id: string }>(
      'SELECT id FROM wharf.provider_event WHERE id = ANY($1::bigint[])', [promised]);
    const stored = new Set(rows.map((row) => Number(row.id)));
    expect(promised.filter((id) => !stored.has(id)), `202s whose rows are gone (${summary})`).toEqual([]);
  } finally {
    await client.end();
  }
});
