// Workload 'admission-cost' (issue 44, goals 1 and 2): what a delivery costs
// the primary on the Workers path, where nothing coalesces and each delivery
// is one wharf.admit, against a plain single-row INSERT of the same payload,
// and what wharf.admit_many costs per call and per delivery.
//
// The two sides of every ratio are interleaved: each repetition runs
// `admissionCostRounds` rounds, and each round a share of the direct admits,
// then as many INSERTs, then as many deliveries by admit_many of 32, from
// `admissionClients` clients; a repetition's figure sums its rounds. A
// ratio of two sides measured minutes apart under different load is not a
// result.
//
// admit_many's batches share scopes in random order: each delivery's subject
// is drawn at random from `orderedScopes`, so that eight callers' batches
// lock overlapping scopes in every order they can (a deadlock is counted).
// Its cost per call is then measured at 1, 2, 4 … 64 deliveries per call,
// and a least-squares line through those gives the fixed cost of one call
// and the cost of each delivery in it. Deadlocks are counted, not thrown.
import type pg from 'pg';
import { withBenchDatabase } from '../databases.js';
import { makePayload } from '../payload.js';
import type { BenchResults, Log } from '../results.js';
import type { BenchSettings } from '../settings.js';
import { createPlainInbox } from '../systems/minimal-receiver.js';
import { admitPush, setupWharfInstallation, subjectOf } from '../systems/wharf-inbox.js';
import { admitManyBatch, plainInsert, pushDeliveries, timeCallsMetered, type Metered } from './admission.js';

/** Rounds per repetition: the sides take turns this many times. */
const rounds = 4;
/** admit_many's sizes for the fixed-cost line. */
const sweepSizes = [1, 2, 4, 8, 16, 32, 64];

interface Tally { seconds: number; micros: number; deliveries: number; metered: boolean }

const emptyTally = (): Tally => ({ seconds: 0, micros: 0, deliveries: 0, metered: true });

function addTo(tally: Tally, measured: Metered, deliveries: number): void {
  tally.seconds += deliveries / measured.rate;
  tally.deliveries += deliveries;
  if (measured.postgresMicros === undefined) tally.metered = false;
  else tally.micros += measured.postgresMicros * deliveries;
}

function record(results: BenchResults, id: string, label: string, tally: Tally, log: Log): void {
  const rate = tally.deliveries / tally.seconds;
  results.add('admission-cost', id, label, 'events/s', rate);
  const cpu = tally.metered ? tally.micros / tally.deliveries : undefined;
  if (cpu !== undefined) {
    results.add('admission-cost', `${id}.cpu_postgres`, `${label}: PostgreSQL CPU per delivery`, 'µs CPU', cpu);
  }
  log(`  ${label}: ${rate.toFixed(0)}/s${cpu !== undefined ? `, PostgreSQL ${cpu.toFixed(0)} µs CPU per delivery` : ''}`);
}

/** Least squares: y = fixed + perUnit × x. */
function fitLine(points: { x: number; y: number }[]): { fixed: number; perUnit: number } {
  const n = points.length;
  const meanX = points.reduce((sum, p) => sum + p.x, 0) / n;
  const meanY = points.reduce((sum, p) => sum + p.y, 0) / n;
  const sxx = points.reduce((sum, p) => sum + (p.x - meanX) ** 2, 0);
  const sxy = points.reduce((sum, p) => sum + (p.x - meanX) * (p.y - meanY), 0);
  const perUnit = sxx === 0 ? 0 : sxy / sxx;
  return { fixed: meanY - perUnit * meanX, perUnit };
}

/** admit_many calls of `size` random pushes, `deliveries` in all, from `clients` clients; deadlocks counted, not thrown. */
async function admitManyRandom(
  pool: pg.Pool, clients: number, label: string, size: number, deliveries: number, scopes: number,
): Promise<{ measured: Metered; deadlocks: number }> {
  let deadlocks = 0;
  const calls = Math.ceil(deliveries / size);
  const measured = await timeCallsMetered(pool, clients, calls, calls * size, async (client, call) => {
    try {
      const { rows } = await client.query<{ receipts: { error?: unknown }[] }>('SELECT wharf.admit_many($1::jsonb) AS receipts',
        [pushDeliveries(call * size, size, scopes, { label, subjectFor: () => subjectOf(Math.floor(Math.random() * scopes)) })]);
      if (rows[0]!.receipts.some((receipt) => receipt.error)) throw new Error('admit_many refused a bench delivery');
    } catch (error) {
      if ((error as { code?: string }).code !== '40P01') throw error;
      deadlocks += 1;
    }
  });
  return { measured, deadlocks };
}

export async function runAdmissionCost(settings: BenchSettings, results: BenchResults, log: Log): Promise<void> {
  const { admissionClients: clients, admissionEvents: events, orderedScopes: scopes } = settings;
  const perRound = Math.max(1, Math.floor(events / rounds));
  for (let rep = 1; rep <= settings.repetitions; rep += 1) {
    log(`admission cost, repetition ${rep}/${settings.repetitions} (${clients} clients, ${rounds} rounds of ${perRound} per side)`);
    await withBenchDatabase(settings.serverUrl, 'cost_wharf', { wharf: true, poolSize: clients + 2 }, async (wharf) => {
      await setupWharfInstallation(wharf.pool, scopes);
      await withBenchDatabase(settings.serverUrl, 'cost_plain', { wharf: false, poolSize: clients + 2 }, async (plain) => {
        await createPlainInbox(plain.pool);
        const [admit, insert, many] = [emptyTally(), emptyTally(), emptyTally()];
        let deadlocks = 0;
        for (let round = 0; round < rounds; round += 1) {
          const first = round * perRound;
          addTo(admit, await timeCallsMetered(wharf.pool, clients, perRound, perRound, (client, seq) =>
            admitPush(client, `direct-${first + seq}`, (first + seq) % scopes, first + seq)), perRound);
          addTo(insert, await timeCallsMetered(plain.pool, clients, perRound, perRound, (client, seq) => {
            const subject = subjectOf((first + seq) % scopes);
            return client.query(plainInsert, [`delivery-${first + seq}`, subject, makePayload(subject, first + seq)]);
          }), perRound);
          const batched = await admitManyRandom(wharf.pool, clients, `many-${round}`, admitManyBatch, perRound, scopes);
          addTo(many, batched.measured, Math.ceil(perRound / admitManyBatch) * admitManyBatch);
          deadlocks += batched.deadlocks;
        }
        record(results, 'admission_cost.admit', 'wharf.admit, one delivery per call and transaction', admit, log);
        record(results, 'admission_cost.insert', 'plain single-row INSERT of the same payload', insert, log);
        record(results, 'admission_cost.admit_many32',
          `wharf.admit_many of ${admitManyBatch}, subjects at random among ${scopes} (batches share scopes)`, many, log);

        // The cost of one call by its size, on the same database.
        const points: { x: number; y: number }[] = [];
        for (const size of sweepSizes) {
          const { measured, deadlocks: lost } = await admitManyRandom(wharf.pool, clients, `sweep-${size}`, size, perRound, scopes);
          deadlocks += lost;
          // Without /proc of the server there is no CPU to fit; the deadlocks still count.
          if (measured.postgresMicros === undefined) continue;
          const perCall = measured.postgresMicros * size;
          points.push({ x: size, y: perCall });
          results.add('admission-cost', `admission_cost.size${size}.cpu_call`,
            `wharf.admit_many of ${size}: PostgreSQL CPU per call`, 'µs CPU', perCall);
        }
        results.add('admission-cost', 'admission_cost.deadlocks', 'deadlocks among all admit_many calls of the repetition', 'deadlocks', deadlocks);
        if (points.length < 2) return;
        const line = fitLine(points);
        results.add('admission-cost', 'admission_cost.fixed_cpu', 'wharf.admit_many: fixed PostgreSQL CPU of one call (fit over 1…64)',
          'µs CPU', line.fixed);
        results.add('admission-cost', 'admission_cost.per_delivery_cpu', 'wharf.admit_many: PostgreSQL CPU of each delivery in a call (the same fit)',
          'µs CPU', line.perUnit);
        log(`  admit_many by size: ${line.fixed.toFixed(0)} µs per call + ${line.perUnit.toFixed(0)} µs per delivery`);
      });
    });
  }
}
