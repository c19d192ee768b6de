// Samples the system's tables once a second on a session opened before any
// fault: dead and live tuples and autovacuum runs (pg_stat_user_tables, which
// takes no lock), and sizes (pg_total_relation_size, which needs a lock on
// the table: under a held ACCESS EXCLUSIVE lock it gives up after 200 ms
// and the sample has no sizes).
import pg from 'pg';
import { appNames, withApplicationName } from './faults.js';

export interface TableSample {
  relation: string;
  deadTuples: number;
  liveTuples: number;
  autovacuums: number;
  /** Heap, TOAST and indexes; undefined when the table was locked. */
  bytes?: number;
}

export interface MonitorSample {
  /** ms since the load started. */
  at: number;
  tables: TableSample[];
}

export class Monitor {
  readonly samples: MonitorSample[] = [];
  private timer: NodeJS.Timeout | undefined;
  private busy = false;

  private constructor(private client: pg.Client, private readonly databaseUrl: string, private readonly schemas: string[]) {}

  private static async connect(databaseUrl: string): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: withApplicationName(databaseUrl, appNames.monitor) });
    client.on('error', () => {});
    await client.connect();
    await client.query(`SET lock_timeout = '200ms'`);
    return client;
  }

  static async open(databaseUrl: string, schemas: string[]): Promise<Monitor> {
    return new Monitor(await Monitor.connect(databaseUrl), databaseUrl, schemas);
  }

  /** One sample now; after a failed one (its server went: a failover), on a new session. */
  async sample(t0: number): Promise<MonitorSample> {
    try {
      return await this.sampleOnce(t0);
    } catch (error) {
      await this.client.end().catch(() => {});
      this.client = await Monitor.connect(this.databaseUrl);
      throw error;
    }
  }

  private async sampleOnce(t0: number): Promise<MonitorSample> {
    const at = Date.now() - t0;
    const { rows } = await this.client.query<{ relation: string; dead: string; live: string; autovacuums: string }>(`
      SELECT schemaname || '.' || relname AS relation, n_dead_tup AS dead, n_live_tup AS live, autovacuum_count AS autovacuums
        FROM pg_stat_user_tables WHERE schemaname = ANY($1) ORDER BY 1`, [this.schemas]);
    const sizes = await this.client.query<{ relation: string; bytes: string }>(`
      SELECT n.nspname || '.' || c.relname AS relation, pg_total_relation_size(c.oid) AS bytes
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = ANY($1) AND c.relkind = 'r'`, [this.schemas]).catch(() => undefined);
    const bytes = new Map(sizes?.rows.map((row) => [row.relation, Number(row.bytes)]) ?? []);
    const sample: MonitorSample = {
      at,
      tables: rows.map((row) => ({
        relation: row.relation,
        deadTuples: Number(row.dead),
        liveTuples: Number(row.live),
        autovacuums: Number(row.autovacuums),
        ...(bytes.has(row.relation) ? { bytes: bytes.get(row.relation)! } : {}),
      })),
    };
    this.samples.push(sample);
    return sample;
  }

  /** Samples every `everyMs` until stop(); a sample still running is not overlapped. */
  start(t0: number, everyMs = 1000): void {
    this.timer = setInterval(() => {
      if (this.busy) return;
      this.busy = true;
      this.sample(t0).catch(() => undefined).finally(() => {
        this.busy = false;
      });
    }, everyMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    while (this.busy) await new Promise((resolve) => setTimeout(resolve, 20));
    await this.client.end().catch(() => {});
  }
}

/** Dead tuples over every sampled table. */
export const totalDead = (sample: MonitorSample): number => sample.tables.reduce((sum, t) => sum + t.deadTuples, 0);

/** Bytes over every sampled table; undefined when a size is missing. */
export function totalBytes(sample: MonitorSample): number | undefined {
  let sum = 0;
  for (const table of sample.tables) {
    if (table.bytes === undefined) return undefined;
    sum += table.bytes;
  }
  return sum;
}
