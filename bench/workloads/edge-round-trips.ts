// Issue 19: how many round trips to the database's region one delivery costs
// the Cloudflare Worker, per path to PostgreSQL, warm and cold. Not a timed
// test: `npm run bench -- --edge-round-trips` runs it alone and writes its own
// section of bench/RESULTS.md.
//
// A delaying proxy (test/support/delay-proxy.ts) sits where the distance is:
// between the Worker and the far end it talks to, or, for Hyperdrive, between
// Hyperdrive's edge and the database (Hyperdrive answers the connection setup
// next to the Worker). For each configuration, signed GitHub pushes go one at
// a time through `wrangler`'s workerd, with the proxy at 0 ms and at 50 ms
// each way; round trips = (median at 50 ms − median at 0 ms) / 100 ms.
// The far ends are local stand-ins (test/support/): the Neon HTTP stand-in is
// a fake of Neon's /sql endpoint, the Hyperdrive stand-in a fake of Hyperdrive.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { signGitHubBody } from '../../edge/adapters/index.js';
import { createScratchDatabase, type ScratchDatabase } from '../../cli/scratch-database.js';
import { startDelayProxy, type DelayProxy } from '../../test/support/delay-proxy.js';
import {
  hyperdriveBindings, neonHttpBindings, plain, startEdgeWorker, type EdgeWorker,
} from '../../test/support/edge-worker.js';
import { startHyperdriveStandIn, type HyperdriveStandIn } from '../../test/support/hyperdrive-stand-in.js';
import { startNeonHttpStandIn, type NeonHttpStandIn } from '../../test/support/neon-http-stand-in.js';
import type { Log } from '../results.js';
import { percentile } from '../stats.js';

export const edgeRoundTripsHeading = '## Edge round trips (issue 19)';

export interface EdgeRoundTripSettings {
  serverUrl: string;
  /** Signed pushes per measured run. */
  pushes: number;
  /** One-way delay of the far run. */
  delayMs: number;
  /** Runs of each configuration at each delay. */
  repetitions: number;
}

export const edgeRoundTripDefaults = { pushes: 30, delayMs: 50, repetitions: 2 } as const;
export const edgeRoundTripSmoke = { pushes: 5, delayMs: 50, repetitions: 1 } as const;

interface Configuration {
  id: string;
  path: string;
  temperature: 'warm' | 'cold';
  recommended: boolean;
  /** What is warm or cold about it, for the table. */
  note: string;
  worker: EdgeWorker;
  link: DelayProxy;
  /** Puts the far end in this configuration's state (keep-alive, pool). */
  prepare(): void;
  /** New connections so far, of the kind `counted` names. */
  connections(): number;
  counted: string;
}

export interface ConfigurationResult {
  id: string;
  path: string;
  temperature: 'warm' | 'cold';
  recommended: boolean;
  note: string;
  /** Median latency per run, at 0 ms and at the delay. */
  nearMs: number[];
  farMs: number[];
  /** Per run: (far − near) / (2 × delay). */
  roundTrips: number[];
  /** New connections per delivery in the far runs, of the kind `counted` names. */
  connectionsPerDelivery: number;
  counted: string;
}

export interface EdgeRoundTripReport {
  settings: Omit<EdgeRoundTripSettings, 'serverUrl'>;
  startedAt: Date;
  finishedAt: Date;
  versions: Record<string, string>;
  results: ConfigurationResult[];
}

const median = (values: number[]) => percentile([...values].sort((a, b) => a - b), 50);

function versionOf(name: string): string {
  const file = new URL(`../../node_modules/${name}/package.json`, import.meta.url);
  return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
}

/** GitHub's secret for the bench App (any string: the Worker and the bench share it). */
const appSecret = 'edge-round-trips-bench-secret';

async function seedInstallation(db: ScratchDatabase): Promise<{ installation: number; repository: string }> {
  const installation = 19_000_000 + Math.floor(Math.random() * 1_000_000);
  const repository = `acme/round-trips-${installation}`;
  await db.pool.query('SELECT wharf.upsert_workspace(1)');
  const { rows } = await db.pool.query<{ id: string }>(
    "SELECT wharf.upsert_connection(1, 'github', 'https://github.com', 'app_installation', $1, '{}'::jsonb) AS id",
    [String(installation)]);
  await db.pool.query('SELECT wharf.subscribe($1, $2)', [rows[0]!.id, `repo:${repository}`]);
  return { installation, repository };
}

/** One signed push, answered 202 and stored; its latency in ms. */
async function push(worker: EdgeWorker, target: { installation: number; repository: string }): Promise<number> {
  const key = randomUUID();
  // GitHub deduplicates by body too: each push is a body of its own.
  const body = JSON.stringify({
    ref: 'refs/heads/main', before: '0'.repeat(40), after: key, installation: { id: target.installation },
    repository: { full_name: target.repository, owner: { login: 'acme' } }, commits: [],
  });
  const headers = { 'x-github-event': 'push', 'x-github-delivery': key, 'x-hub-signature-256': await signGitHubBody(appSecret, body) };
  const started = performance.now();
  const response = await worker.fetch('http://edge.bench/hooks/github/test', { method: 'POST', body, headers });
  const text = await response.text();
  const elapsed = performance.now() - started;
  if (response.status !== 202 || !text.includes('"stored"')) {
    throw new Error(`edge round trips: expected 202 stored, got ${response.status} ${text.slice(0, 200)}`);
  }
  return elapsed;
}

/** The median latency of `pushes` deliveries with the link at `delayMs`, and new connections per delivery. */
async function measure(
  configuration: Configuration, target: { installation: number; repository: string }, delayMs: number, pushes: number,
): Promise<{ medianMs: number; connectionsPerDelivery: number }> {
  configuration.link.delayMs = delayMs;
  configuration.link.cut(); // every connection from here on has this delay
  configuration.prepare();
  // Warm: the first deliveries open what later ones reuse. Cold: nothing is reused anyway.
  for (let i = 0; i < 2; i += 1) await push(configuration.worker, target);
  const before = configuration.connections();
  const latencies: number[] = [];
  for (let i = 0; i < pushes; i += 1) latencies.push(await push(configuration.worker, target));
  return { medianMs: median(latencies), connectionsPerDelivery: (configuration.connections() - before) / pushes };
}

export async function runEdgeRoundTrips(settings: EdgeRoundTripSettings, log: Log = () => {}): Promise<EdgeRoundTripReport> {
  const startedAt = new Date();
  const db = await createScratchDatabase(settings.serverUrl, { prefix: 'bench_edge' });
  const server = new URL(db.url);
  const postgres = { host: server.hostname, port: Number(server.port || 5432) };
  const through = (proxy: { address: string }) => {
    const url = new URL(db.url);
    url.host = proxy.address;
    return url.href;
  };
  const closers: (() => Promise<unknown>)[] = [() => db.drop()];
  try {
    const target = await seedInstallation(db);
    const common = { GITHUB_APP_TEST_WEBHOOK_SECRET: plain(appSecret), WHARF_DATABASE_TIMEOUT_MS: plain('10000') };

    // Neon HTTP: Worker —link→ /sql stand-in → PostgreSQL (the stand-in sits in the database's region).
    const neonStandIn: NeonHttpStandIn = await startNeonHttpStandIn();
    const neonLink = await startDelayProxy({ target: { host: '127.0.0.1', port: neonStandIn.port } });
    // Hyperdrive as Cloudflare describes it: connection setup at the edge, next
    // to the Worker; one round trip across regions to a pool next to the
    // database. Two stand-ins model the two sides: Worker → edge side —link→
    // pool side → PostgreSQL. The edge side keeps its connections to the pool
    // side open across deliveries; the pool side opens database connections
    // locally (per transaction when cold).
    const hyperdrivePool: HyperdriveStandIn = await startHyperdriveStandIn({ upstream: db.url });
    const hyperdriveLink = await startDelayProxy({ target: { host: '127.0.0.1', port: hyperdrivePool.port } });
    const hyperdrive: HyperdriveStandIn = await startHyperdriveStandIn({ upstream: through(hyperdriveLink) });
    // pg straight over TCP: wrangler's local Hyperdrive (no pool) —link→ PostgreSQL.
    const directLink = await startDelayProxy({ target: postgres });
    closers.push(() => neonStandIn.close(), () => neonLink.close(), () => hyperdrive.close(),
      () => hyperdriveLink.close(), () => hyperdrivePool.close(), () => directLink.close());

    log('edge round trips: starting three Workers under workerd');
    const [neonWorker, hyperdriveWorker, directWorker] = await Promise.all([
      startEdgeWorker({ ...common, ...neonHttpBindings(db.url, `http://${neonLink.address}/sql`) }),
      startEdgeWorker({ ...common, ...hyperdriveBindings(hyperdrive.connectionString) }),
      startEdgeWorker({ ...common, ...hyperdriveBindings(through(directLink)) }),
    ]);
    closers.push(() => neonWorker.dispose(), () => hyperdriveWorker.dispose(), () => directWorker.dispose());

    const configurations: Configuration[] = [
      {
        id: 'neon-http.warm', path: 'Neon HTTP (`neon()`, DATABASE_URL)', temperature: 'warm', recommended: true,
        note: "the Worker's kept-alive HTTP connection to the endpoint is reused",
        worker: neonWorker, link: neonLink, prepare: () => { neonStandIn.keepAlive = true; }, connections: () => neonLink.accepted, counted: 'Worker → endpoint',
      },
      {
        id: 'neon-http.cold', path: 'Neon HTTP (`neon()`, DATABASE_URL)', temperature: 'cold', recommended: true,
        note: 'every delivery opens a new connection to the endpoint (a new isolate, or after an idle timeout); TCP handshake modelled, TLS not',
        worker: neonWorker, link: neonLink, prepare: () => { neonStandIn.keepAlive = false; }, connections: () => neonLink.accepted, counted: 'Worker → endpoint',
      },
      {
        id: 'hyperdrive.warm', path: 'Hyperdrive binding + `pg` (HYPERDRIVE)', temperature: 'warm', recommended: true,
        note: "a new `pg` Client per delivery (so a new isolate costs the same), set up at the edge; Hyperdrive's pool holds a database connection",
        worker: hyperdriveWorker, link: hyperdriveLink,
        prepare: () => { hyperdrivePool.pooled = true; }, connections: () => hyperdrivePool.opened, counted: 'pool → database',
      },
      {
        id: 'hyperdrive.cold', path: 'Hyperdrive binding + `pg` (HYPERDRIVE)', temperature: 'cold', recommended: true,
        note: "Hyperdrive's pool empty: each delivery's transaction opens a database connection, next to the database (trust auth locally)",
        worker: hyperdriveWorker, link: hyperdriveLink,
        prepare: () => { hyperdrivePool.pooled = false; hyperdrivePool.drain(); },
        connections: () => hyperdrivePool.opened, counted: 'pool → database',
      },
      {
        id: 'pg-direct', path: '`pg` straight over TCP (wrangler dev\'s local Hyperdrive: no pool)', temperature: 'cold', recommended: false,
        note: 'what Hyperdrive saves: TCP handshake + startup + statement per delivery, all across the distance (the close follows the answer)',
        worker: directWorker, link: directLink, prepare: () => {}, connections: () => directLink.accepted, counted: 'Worker → database',
      },
    ];

    const results: ConfigurationResult[] = [];
    for (const configuration of configurations) {
      const nearMs: number[] = [];
      const farMs: number[] = [];
      const roundTrips: number[] = [];
      let connections = 0;
      for (let run = 0; run < settings.repetitions; run += 1) {
        const near = await measure(configuration, target, 0, settings.pushes);
        const far = await measure(configuration, target, settings.delayMs, settings.pushes);
        nearMs.push(near.medianMs);
        farMs.push(far.medianMs);
        roundTrips.push((far.medianMs - near.medianMs) / (2 * settings.delayMs));
        connections += far.connectionsPerDelivery / settings.repetitions;
        log(`  ${configuration.id} run ${run + 1}: ${near.medianMs.toFixed(1)} ms at 0 ms, ${far.medianMs.toFixed(1)} ms at ` +
          `${settings.delayMs} ms → ${roundTrips.at(-1)!.toFixed(2)} round trips, ${far.connectionsPerDelivery.toFixed(2)} connections/delivery`);
      }
      results.push({
        id: configuration.id, path: configuration.path, temperature: configuration.temperature,
        recommended: configuration.recommended, note: configuration.note, nearMs, farMs, roundTrips,
        connectionsPerDelivery: connections, counted: configuration.counted,
      });
    }
    return {
      settings: { pushes: settings.pushes, delayMs: settings.delayMs, repetitions: settings.repetitions },
      startedAt,
      finishedAt: new Date(),
      versions: Object.fromEntries(['wrangler', 'miniflare', '@neondatabase/serverless', 'pg'].map((name) => [name, versionOf(name)])),
      results,
    };
  } finally {
    for (const close of closers.reverse()) await close().catch(() => {});
  }
}

const fixed = (value: number, digits: number) => value.toFixed(digits);

/** The goal of issue 19: ≤ 1.1 round trips warm and ≤ 3 cold on the recommended paths. */
export function judgeRoundTrips(result: ConfigurationResult): 'met' | 'not met' | '' {
  if (!result.recommended) return '';
  const limit = result.temperature === 'warm' ? 1.1 : 3;
  return median(result.roundTrips) <= limit ? 'met' : 'not met';
}

export function renderEdgeRoundTrips(report: EdgeRoundTripReport): string {
  const { settings } = report;
  const out: string[] = [edgeRoundTripsHeading, ''];
  out.push(`Run ${report.startedAt.toISOString()} → ${report.finishedAt.toISOString()} with \`npm run bench -- --edge-round-trips\` ` +
    `(${Object.entries(report.versions).map(([name, version]) => `${name} ${version}`).join(', ')}, Node ${process.version}).`, '');
  out.push(`${settings.pushes} signed GitHub pushes per run, one at a time, through \`server/cloudflare-worker.ts\` under ` +
    `workerd (wrangler's \`unstable_startWorker\`), with a delaying proxy at 0 ms and at ${settings.delayMs} ms each way; ` +
    `${settings.repetitions} run(s) of each. Round trips per delivery = (median at ${settings.delayMs} ms − median at 0 ms) / ` +
    `${2 * settings.delayMs} ms; the figure is the median over the runs, the runs follow it. The proxy charges a new ` +
    'connection one round trip for its TCP handshake; TLS is not modelled (in production it adds about one round trip ' +
    'to each new connection that crosses the distance).', '');
  out.push('**The far ends are local stand-ins, not the services.** The Neon HTTP path talks to ' +
    "`test/support/neon-http-stand-in.ts`, a fake of Neon's `/sql` endpoint that sits with the database and runs each " +
    'statement on a pooled `pg` connection; the delay is between the Worker and it. The Hyperdrive path talks to ' +
    "wrangler's local Hyperdrive in front of two chained fakes of `test/support/hyperdrive-stand-in.ts`, modelling " +
    "Hyperdrive as Cloudflare documents it: an edge side next to the Worker that answers the connection setup at once, " +
    'and a pool side next to the database, with the delay between them (the edge side keeps its connections to the ' +
    "pool side). The last row is wrangler's local Hyperdrive alone, which connects straight to PostgreSQL across the " +
    'delay for every delivery: what a Worker pays without Hyperdrive.', '');
  out.push('| path | warm / cold | round trips per delivery | runs | median ms at 0 / ' +
    `${settings.delayMs} ms | new connections per delivery | goal | what is warm or cold |`);
  out.push('|---|---|---:|---|---|---:|---|---|');
  for (const result of report.results) {
    const goal = judgeRoundTrips(result);
    out.push(`| ${result.path} | ${result.temperature} | **${fixed(median(result.roundTrips), 2)}** | ` +
      `${result.roundTrips.map((value) => fixed(value, 2)).join(', ')} | ` +
      `${fixed(median(result.nearMs), 1)} / ${fixed(median(result.farMs), 1)} | ${fixed(result.connectionsPerDelivery, 2)} (${result.counted}) | ` +
      `${goal ? `${goal === 'met' ? '≤' : '>'} ${result.temperature === 'warm' ? '1.1' : '3'}: **${goal}**` : '—'} | ${result.note} |`);
  }
  out.push('');
  out.push('Reading:', '');
  out.push('- Before this change the Worker opened a WebSocket `Client` per statement and awaited its close: ' +
    '5.07 round trips per delivery measured the same way (issue 19), 4.04 without the awaited close.');
  out.push('- Cold Neon HTTP pays the new connection: its TCP handshake here, plus TLS in production (one more round ' +
    'trip with TLS 1.3), so about 3 on a new isolate or after the connection idled out, then 1.');
  out.push("- On the Hyperdrive path every delivery is a new `pg` Client, so a new isolate costs what a warm one does; " +
    "what can be cold is Hyperdrive's pool, whose database connections are opened next to the database. " +
    'Without Hyperdrive (last row) the connection setup crosses the distance on every delivery: 3 round trips here ' +
    '(TCP, startup with trust authentication, statement); with TLS and password authentication Cloudflare counts ' +
    'seven before the statement.');
  out.push("- A GitHub or Slack App's secret is a binding: no lookup. A per-connection endpoint (GitLab, Outline, " +
    'Forgejo, Standard Webhooks) adds one statement when its isolate has not cached the endpoint in the last ' +
    '`WHARF_SECRET_CACHE_SECONDS`, and none when it has.');
  out.push("- Inside workerd `pg` writes each message of a statement separately (pg-cloudflare's socket has no cork); " +
    "behind wrangler's local Hyperdrive proxy, which batches small writes, that cost about 40 ms per statement " +
    'until server/corkable-socket.ts gave the socket a cork.', '');
  return out.join('\n');
}

/** `markdown` with its edge round-trips section replaced by `section`, or `section` appended. */
export function withEdgeRoundTrips(markdown: string, section: string): string {
  const start = markdown.indexOf(edgeRoundTripsHeading);
  if (start < 0) return `${markdown.trimEnd()}\n\n${section.trimEnd()}\n`;
  const next = markdown.indexOf('\n## ', start + edgeRoundTripsHeading.length);
  const rest = next < 0 ? '' : markdown.slice(next + 1);
  return `${markdown.slice(0, start)}${section.trimEnd()}\n${rest ? `\n${rest}` : ''}`;
}

/** The edge round-trips section of `markdown`, if it has one. */
export function edgeRoundTripsSection(markdown: string): string | undefined {
  const start = markdown.indexOf(edgeRoundTripsHeading);
  if (start < 0) return undefined;
  const next = markdown.indexOf('\n## ', start + edgeRoundTripsHeading.length);
  return markdown.slice(start, next < 0 ? undefined : next + 1);
}
