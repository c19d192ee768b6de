// What the rig needs of each system: its schema, how its sessions look to the
// fault injector, how deliveries get in, and how to check that what was
// acknowledged is stored. Wharf takes deliveries through its Node receiver
// (signed GitHub pushes over HTTP, server/node.ts in a process of its own);
// graphile-worker has no receiver, so its producer calls add_job directly.
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { ScratchDatabase } from '../../cli/scratch-database.js';
import { migrateGraphile } from '../systems/graphile.js';
import { setupWharfInstallation, subjectOf } from '../systems/wharf-inbox.js';
import { startScript, type ScenarioProcess } from './child-process.js';
import { loadGraphileHistory, loadWharfHistory } from './history.js';
import { appNames, withApplicationName, type SystemSurface } from './faults.js';
import { graphileSender, receiverSender, type Acknowledged, type Send } from './load.js';
import type { ScenarioSettings, SystemName } from './settings.js';

export interface Admission {
  send: Send;
  /** The receiver's process, where there is one. */
  receiver?: ScenarioProcess;
  close(): Promise<void>;
}

export interface ScenarioSystem {
  name: SystemName;
  label: string;
  /** Reads libpq's multi-host URL (a failover cell gives it both hosts; otherwise the proxy that follows the primary). */
  multiHost: boolean;
  /** Schemas whose tables the monitor samples. */
  schemas: string[];
  surface: SystemSurface;
  setup(db: ScratchDatabase, settings: ScenarioSettings): Promise<void>;
  /** `rows` handled deliveries of history, as the system keeps them (history.ts). */
  loadHistory(db: ScratchDatabase, rows: number, settings: ScenarioSettings): Promise<void>;
  startAdmission(db: ScratchDatabase, settings: ScenarioSettings): Promise<Admission>;
  /** Acknowledged deliveries without their row (graphile-worker: without their job or their business row). */
  missingRows(db: ScratchDatabase, acknowledged: readonly Acknowledged[]): Promise<number | undefined>;
}

const receiverScript = fileURLToPath(new URL('../systems/edge-server-process.ts', import.meta.url));
const benchApp = 'bench';

export const wharfSystem: ScenarioSystem = {
  name: 'wharf',
  label: 'Wharf',
  multiHost: true,
  schemas: ['wharf'],
  surface: {
    mainTable: 'wharf.provider_event',
    // The listener's connection also runs the host's claims and idle marks
    // (worker/claim-loop.ts): its last statement is one of these.
    isListener: (query) => /LISTEN wharf_event|wharf\.(claim|mark_idle|mark_busy|next_due_at)\s*\(/.test(query),
    admissionApp: appNames.receiver,
  },
  async setup(db, settings) {
    await setupWharfInstallation(db.pool, settings.scopes);
  },
  async loadHistory(db, rows, settings) {
    await loadWharfHistory(db.pool, rows, settings.scopes);
  },
  async startAdmission(db, settings) {
    const secret = randomBytes(16).toString('hex');
    let url = '';
    const receiver = await startScript<{ url?: string }>(receiverScript, {
      DATABASE_URL: withApplicationName(db.url, appNames.receiver),
      GITHUB_APP_BENCH_WEBHOOK_SECRET: secret,
      WHARF_DATABASE_TIMEOUT_MS: String(settings.receiverDeadlineMs),
      BENCH_RECEIVER_ERRORS: 'stderr',
    }, (line) => {
      if (typeof line.url === 'string') url = line.url;
    }, (line) => typeof line.url === 'string');
    const sender = receiverSender({ url, app: benchApp, secret, hangMs: settings.hangMs });
    return {
      send: sender.send,
      receiver,
      async close() {
        sender.close();
        await receiver.stop();
      },
    };
  },
  async missingRows(db, acknowledged) {
    const ids = [...new Set(acknowledged.map((a) => a.eventId).filter((id): id is string => id !== undefined))];
    const withoutId = acknowledged.filter((a) => a.eventId === undefined).length;
    const { rows } = await db.pool.query<{ n: string }>(
      'SELECT count(*) AS n FROM wharf.provider_event WHERE id = ANY($1::bigint[])', [ids]);
    return ids.length - Number(rows[0]!.n) + withoutId;
  },
};

export const graphileSystem: ScenarioSystem = {
  name: 'graphile',
  label: 'graphile-worker 0.18 (local queue)',
  // node-postgres takes one host (brianc/node-postgres #1470).
  multiHost: false,
  schemas: ['graphile_worker'],
  surface: {
    mainTable: 'graphile_worker._private_jobs',
    // Its listener holds `LISTEN "jobs:insert"; LISTEN "worker:migrate";` and nothing else.
    isListener: (query) => /^\s*LISTEN\b/i.test(query),
    admissionApp: appNames.producer,
  },
  async setup(db) {
    await migrateGraphile(db.url);
  },
  async loadHistory(db, rows, settings) {
    await loadGraphileHistory(db.pool, rows, settings.scopes);
  },
  async startAdmission(db) {
    const pool = new pg.Pool({ connectionString: withApplicationName(db.url, appNames.producer), max: 16 });
    pool.on('error', () => {});
    return {
      send: graphileSender(pool),
      async close() {
        await pool.end();
      },
    };
  },
  // A job leaves its table when done: an acknowledged delivery is lost when
  // it has neither its business row nor its job.
  async missingRows(db, acknowledged) {
    const { rows } = await db.pool.query<{ n: string }>(`
      SELECT count(*) AS n FROM unnest($1::text[], $2::int[]) AS a(scope, seq)
       WHERE NOT EXISTS (SELECT FROM public.scenario_effect e WHERE e.scope = a.scope AND e.seq = a.seq)
         AND NOT EXISTS (SELECT FROM graphile_worker._private_jobs j
                          WHERE j.payload -> 'bench' ->> 'key' = a.scope AND (j.payload -> 'bench' ->> 'seq')::int = a.seq)`,
    [acknowledged.map((a) => subjectOf(a.scope)), acknowledged.map((a) => a.seq)]);
    return Number(rows[0]!.n);
  },
};

export const systems: Record<SystemName, ScenarioSystem> = { wharf: wharfSystem, graphile: graphileSystem };
