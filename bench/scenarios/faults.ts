// The database faults the scenarios inject, each from sessions of its own
// opened before the fault (so that a full server or a held lock cannot keep
// the injector out): a held snapshot, terminated backends, every free
// connection slot taken, and an ACCESS EXCLUSIVE lock held as a careless
// migration would. The snapshot a pg_dump holds is in pg-dump.ts.
import pg from 'pg';
import type { FailoverPair } from './failover.js';
import { sleep } from './load.js';

/** What a system's sessions look like to the injector. */
export interface SystemSurface {
  /** The table a careless migration locks, and a REPEATABLE READ reader reads. */
  mainTable: string;
  /** Whether a worker backend is the host's listener (its last statement says so). */
  isListener(query: string): boolean;
  /** application_name of the sessions that take deliveries in (the receiver, or graphile-worker's producer). */
  admissionApp: string;
}

/** Sessions of the scenario carry these application names. */
export const appNames = {
  worker: 'scenario_worker',
  receiver: 'scenario_receiver',
  producer: 'scenario_producer',
  monitor: 'scenario_monitor',
  fault: 'scenario_fault',
  /** The pg_dump cell's dumps (pg-dump.ts): how the injector finds their backends. */
  dump: 'scenario_dump',
} as const;

export function withApplicationName(url: string, name: string): string {
  if (/^[a-z]+:\/\/[^/?#]*,/i.test(url)) {
    // libpq's multi-host form, which URL cannot parse: the parameter appended.
    return `${url}${url.includes('?') ? '&' : '?'}application_name=${encodeURIComponent(name)}`;
  }
  const parsed = new URL(url);
  parsed.searchParams.set('application_name', name);
  return parsed.toString();
}

export interface FaultContext {
  /** The system's database (superuser). */
  databaseUrl: string;
  /** The server's maintenance database (superuser), for sessions outside the system's database. */
  serverUrl: string;
  /** The system's database name. */
  database: string;
  surface: SystemSurface;
  /** The primary and its standby of a failover cell (Fault.needsPair). */
  pair?: FailoverPair;
  /** Puts a labelled mark on the timeline. */
  mark(label: string): void;
}

export interface RunningFault {
  /** Ends the fault (releases the snapshot, the slots, the lock; stops killing); resolves once it is over. */
  end(): Promise<Record<string, number | string>>;
}

export interface Fault {
  /** Short id, e.g. `snapshot-idle`. */
  id: string;
  title: string;
  /** Runs on a primary and synchronous standby of the cell's own (bench/scenarios/failover.ts), not on the shared server. */
  needsPair?: boolean;
  /**
   * Checks, before the run measures anything, what the fault needs of the
   * machine (a pg_dump that can dump the server), so that a long run does
   * not fail at its last cell.
   */
  preflight?(serverUrl: string): Promise<void>;
  /** Opens its sessions; nothing happens to the system yet. */
  prepare(context: FaultContext): Promise<{ begin(): Promise<RunningFault> }>;
}

/** A session of the injector's: its application_name keeps it out of the backends the kills pick from. */
export async function session(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: withApplicationName(url, appNames.fault) });
  client.on('error', () => {});
  await client.connect();
  return client;
}

/** The snapshots a session of the injector's holds itself. */
export type SessionSnapshotKind = 'idle-in-transaction' | 'repeatable-read';
/** `pg-dump`: a real pg_dump of the system's database runs through the hold (pg-dump.ts). */
export type SnapshotKind = SessionSnapshotKind | 'pg-dump';

/**
 * A snapshot held for the whole fault. `idle-in-transaction`: a session that
 * wrote (it has a transaction id) and went idle without committing, as an
 * application that forgot a transaction open does. `repeatable-read`: a
 * long report reading the system's main table in one REPEATABLE READ
 * transaction. Either keeps VACUUM from removing any row version that died
 * after it began, in that database.
 */
export function heldSnapshot(kind: SessionSnapshotKind): Fault {
  return {
    id: kind === 'idle-in-transaction' ? 'snapshot-idle' : 'snapshot-rr',
    title: kind === 'idle-in-transaction' ? 'a session idle in transaction' : 'a REPEATABLE READ reader',
    async prepare(context) {
      const client = await session(context.databaseUrl);
      return {
        async begin() {
          if (kind === 'idle-in-transaction') {
            await client.query('BEGIN');
            await client.query('SELECT pg_current_xact_id()');
          } else {
            await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
            await client.query(`SELECT count(*) FROM ${context.surface.mainTable}`);
          }
          // What holds the horizon back: the open transaction's id (idle in
          // transaction; its snapshot ended with its statement) or the
          // snapshot's xmin (REPEATABLE READ).
          const { rows } = await client.query<{ horizon: string | null }>(
            `SELECT coalesce(backend_xmin, backend_xid)::text AS horizon FROM pg_stat_activity WHERE pid = pg_backend_pid()`);
          context.mark('snapshot taken');
          return {
            async end() {
              await client.query('ROLLBACK');
              await client.end();
              context.mark('snapshot released');
              return { 'horizon held at xid': rows[0]?.horizon ?? 'none' };
            },
          };
        },
      };
    },
  };
}

type BackendKind = 'worker' | 'listener' | 'receiver';

/**
 * `pg_terminate_backend` of one backend every `everyMs`: a kind drawn at
 * random among those present (a worker's connection, a worker's listener,
 * the receiver's — or graphile-worker's producer), then one backend of it.
 */
export function killedBackends(everyMs: number): Fault {
  return {
    id: 'kills',
    title: `pg_terminate_backend of a random worker, listener or receiver backend every ${everyMs / 1000} s`,
    async prepare(context) {
      const client = await session(context.databaseUrl);
      return {
        async begin() {
          const killed: Record<BackendKind, number> = { worker: 0, listener: 0, receiver: 0 };
          let stopped = false;
          const loop = (async () => {
            for (let next = Date.now(); !stopped; ) {
              const { rows } = await client.query<{ pid: number; app: string; query: string }>(
                `SELECT pid, application_name AS app, query FROM pg_stat_activity
                  WHERE datname = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid()
                    AND application_name IN ($2, $3)`,
                [context.database, appNames.worker, context.surface.admissionApp]);
              const byKind = new Map<BackendKind, number[]>();
              for (const row of rows) {
                const kind: BackendKind = row.app !== appNames.worker ? 'receiver'
                  : context.surface.isListener(row.query) ? 'listener' : 'worker';
                byKind.set(kind, [...(byKind.get(kind) ?? []), row.pid]);
              }
              const kinds = [...byKind.keys()];
              const kind = kinds[Math.floor(Math.random() * kinds.length)];
              if (kind) {
                const pids = byKind.get(kind)!;
                const pid = pids[Math.floor(Math.random() * pids.length)]!;
                const { rows: done } = await client.query<{ ok: boolean }>('SELECT pg_terminate_backend($1) AS ok', [pid]);
                if (done[0]?.ok) killed[kind] += 1;
              }
              next += everyMs;
              await sleep(Math.max(0, next - Date.now()));
            }
          })();
          context.mark('kills begin');
          return {
            async end() {
              stopped = true;
              await loop;
              await client.end();
              context.mark('kills end');
              return { 'worker backends killed': killed.worker, 'listener backends killed': killed.listener,
                [`${context.surface.admissionApp === appNames.receiver ? 'receiver' : 'producer'} backends killed`]: killed.receiver };
            },
          };
        },
      };
    },
  };
}

/**
 * Another client takes every free connection slot of the server, reserved
 * ones included (it connects as a superuser), and keeps taking each slot
 * that frees up, for the whole fault: a connection leak elsewhere.
 */
export function fullSlots(): Fault {
  return {
    id: 'slots',
    title: 'another client holds every free connection slot',
    async prepare(context) {
      return {
        async begin() {
          const held: pg.Client[] = [];
          let stopped = false;
          let refusals = 0;
          const takeFree = async (): Promise<void> => {
            // Ten at a time until the server refuses one.
            for (;;) {
              const attempts = await Promise.allSettled(Array.from({ length: 10 }, () => session(context.serverUrl)));
              let refused = false;
              for (const attempt of attempts) {
                if (attempt.status === 'fulfilled') held.push(attempt.value);
                else refused = true;
              }
              if (refused) {
                refusals += 1;
                return;
              }
            }
          };
          await takeFree();
          const initially = held.length;
          context.mark(`slots full (${initially} taken)`);
          const keeper = (async () => {
            while (!stopped) {
              await sleep(200);
              if (!stopped) await takeFree();
            }
          })();
          return {
            async end() {
              stopped = true;
              await keeper;
              await Promise.allSettled(held.map((client) => client.end()));
              context.mark('slots free');
              return { 'slots taken at first': initially, 'slots taken in all': held.length };
            },
          };
        },
      };
    },
  };
}

/** No fault at all: the capacity probe's cell (bench/scenarios/run-scenarios.ts). */
export function noFault(): Fault {
  return {
    id: 'capacity',
    title: 'no fault, every scope sending back to back',
    async prepare() {
      return { begin: async () => ({ end: async () => ({}) }) };
    },
  };
}

/** `LOCK TABLE <main table> IN ACCESS EXCLUSIVE MODE` in a transaction held open for the fault. */
export function longLock(): Fault {
  return {
    id: 'lock',
    title: 'LOCK TABLE … IN ACCESS EXCLUSIVE MODE held open',
    async prepare(context) {
      const client = await session(context.databaseUrl);
      return {
        async begin() {
          const asked = Date.now();
          await client.query('BEGIN');
          // As a migration would: it waits for the transactions in its way,
          // and everything after it waits behind it.
          await client.query(`LOCK TABLE ${context.surface.mainTable} IN ACCESS EXCLUSIVE MODE`);
          const waited = Date.now() - asked;
          context.mark('lock granted');
          return {
            async end() {
              await client.query('COMMIT');
              await client.end();
              context.mark('lock released');
              return { 'ms waited for the lock': waited };
            },
          };
        },
      };
    },
  };
}
