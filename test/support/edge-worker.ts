// The edge Worker (wrangler.toml, server/cloudflare-worker.ts) inside workerd,
// started from Node with wrangler's unstable_startWorker, offline: for the
// workerd tests and bench/workloads/edge-round-trips.ts. Each path to
// PostgreSQL is a set of bindings (server/worker-database.ts).
import type { Binding } from 'wrangler';

export type EdgeWorker = Awaited<ReturnType<typeof import('wrangler').unstable_startWorker>>;

export const plain = (value: string): Binding => ({ type: 'plain_text', value });

/** The bindings of the Neon HTTP path: DATABASE_URL, its statements sent to `endpoint` (a stand-in). */
export function neonHttpBindings(databaseUrl: string, endpoint: string): Record<string, Binding> {
  return { DATABASE_URL: plain(databaseUrl), NEON_HTTP_ENDPOINT: plain(endpoint) };
}

/**
 * The bindings of the Hyperdrive path: wrangler's local Hyperdrive connects
 * straight to `connectionString` (it must name a password; trust
 * authentication ignores it).
 */
export function hyperdriveBindings(connectionString: string): Record<string, Binding> {
  const url = new URL(connectionString);
  if (url.password === '') url.password = 'unused';
  return { HYPERDRIVE: { type: 'hyperdrive', id: 'local', localConnectionString: url.href } };
}

export async function startEdgeWorker(bindings: Record<string, Binding>): Promise<EdgeWorker> {
  // Offline: no update check, no Request.cf fetch, no telemetry.
  process.env.WRANGLER_SEND_METRICS = 'false';
  process.env.CLOUDFLARE_CF_FETCH_ENABLED = 'false';
  process.env.WRANGLER_HIDE_BANNER = 'true';
  const { unstable_startWorker } = await import('wrangler');
  const worker = await unstable_startWorker({
    config: 'wrangler.toml',
    bindings,
    // Without nodejs_compat v2 the build fails and fetch hangs (TOOLCHAIN.md).
    build: { nodejsCompatMode: 'v2' },
    dev: {
      server: { hostname: '127.0.0.1', port: 0 },
      inspector: false,
      watch: false,
      // Each runtime keeps its storage (the Cache API's SQLite among it) in
      // memory: runtimes started side by side on the default .wrangler/state
      // found its SQLite locked (SQLITE_BUSY), and one died at start or later.
      persist: false,
      // The Worker's own log lines are asserted in the Node suites; keep runs quiet.
      logLevel: 'error',
    },
  });
  await worker.ready;
  return worker;
}
