// What the sweeper tests share: a test database, the Wharf edge (the real
// Hono app, GitHub adapter and wharf.admit) whose database can be cut off to
// make it answer 503, a fake GitHub (test/support/fake-github.ts) that sends
// signed deliveries to that edge and serves the App's deliveries API, and
// the App's key pair, made here with node:crypto.
import { generateKeyPairSync } from 'node:crypto';
import { createEdgeApp } from '../../edge/app.js';
import type { Database } from '../../db/database.js';
import { readGitHubAppConfig, type GitHubAppConfig } from '../../recovery/index.js';
import type { TestDatabase } from '../support/database.js';
import { edgeEnv, freshId, githubSecret, recorder, scenario, type ProviderScenario } from '../support/edge-fixtures.js';
import { startFakeGitHub, type FakeGitHub } from '../support/fake-github.js';

/** One key pair per test file: RSA key generation takes a moment. */
export const appKeys = generateKeyPairSync('rsa', {
  modulusLength: 2048,
  // PKCS#1, as GitHub hands out App private keys.
  privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
  publicKeyEncoding: { type: 'spki', format: 'pem' },
});

export interface EdgeAnswer {
  guid: string;
  status: number;
  /** The receipt's outcome for the event: stored or duplicate. */
  outcome: string | undefined;
}

export interface Rig {
  fake: FakeGitHub;
  appId: string;
  /** Wharf's name of the App: /hooks/github/test, GITHUB_APP_TEST_*. */
  app: 'test';
  /** What `wharf recover` and the schedule read: the App's id, key and API URL (the fake). */
  env: Record<string, string>;
  config: GitHubAppConfig;
  scenario: ProviderScenario;
  /** While true, the edge cannot reach its database and answers 503. */
  outage: boolean;
  /** Every answer of the edge, in order. */
  answers: EdgeAnswer[];
  /**
   * Sends `count` pull_request deliveries through the fake; returns their GUIDs.
   * `unwatched`: about a repository no connection subscribes to, so the edge
   * answers 202 and stores nothing (dropped `no-subscriber`): answered on
   * purpose, never to be redelivered.
   */
  send(count: number, options?: { recordAs?: number; unwatched?: boolean }): Promise<string[]>;
  /** How many inbox rows each GUID has (0 for none). */
  stored(guids: readonly string[]): Promise<Map<string, number>>;
  close(): Promise<void>;
}

export async function createRig(db: TestDatabase, options: { maxPerPage?: number } = {}): Promise<Rig> {
  const appId = String(freshId());
  const s = await scenario(db.pool, 'github', freshId());
  const answers: EdgeAnswer[] = [];
  const rig = { outage: false } as Rig;
  // The edge's database: the real one, or, during an outage, one that cannot
  // be reached (an error without a SQLSTATE, as a refused connection gives).
  const database: Database = {
    async query<Row extends object>(text: string, params?: unknown[]) {
      if (rig.outage) throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { errno: -111 });
      const result = await db.pool.query(text, params);
      return { rows: result.rows as Row[] };
    },
  };
  const edge = createEdgeApp({ database, env: edgeEnv, ...recorder() });
  const fake = await startFakeGitHub({
    appId,
    publicKey: appKeys.publicKey,
    webhookSecret: githubSecret,
    ...(options.maxPerPage !== undefined ? { maxPerPage: options.maxPerPage } : {}),
    async deliver({ headers, body }) {
      const response = await edge.request(s.path, { method: 'POST', headers, body });
      const receipt = await response.json().catch(() => ({})) as { events?: { outcome?: string }[] };
      answers.push({ guid: headers['x-github-delivery']!, status: response.status, outcome: receipt.events?.[0]?.outcome });
      return response.status;
    },
  });
  const env = {
    GITHUB_APP_TEST_ID: appId,
    GITHUB_APP_TEST_PRIVATE_KEY: appKeys.privateKey,
    GITHUB_APP_TEST_API_URL: fake.url,
  };
  return Object.assign(rig, {
    fake, appId, app: 'test' as const, env, config: readGitHubAppConfig(env, 'test'), scenario: s, answers,
    async send(count: number, sendOptions: { recordAs?: number; unwatched?: boolean } = {}) {
      const guids: string[] = [];
      for (let i = 0; i < count; i++) {
        const payload = s.payload(`pr-${freshId()}`);
        if (sendOptions.unwatched) payload.repository = { full_name: `acme/unwatched-${appId}`, owner: { login: 'acme' } };
        const { delivery } = await fake.send(
          { event: 'pull_request', action: 'opened', payload },
          sendOptions.recordAs !== undefined ? { recordAs: sendOptions.recordAs } : {},
        );
        guids.push(delivery.guid);
      }
      return guids;
    },
    async stored(guids: readonly string[]) {
      const { rows } = await db.pool.query<{ delivery_key: string; n: string }>(
        `SELECT delivery_key, count(*) AS n FROM wharf.provider_event WHERE provider = 'github' AND delivery_key = ANY($1)
          GROUP BY delivery_key`, [guids]);
      const counts = new Map(guids.map((guid) => [guid, 0]));
      for (const row of rows) counts.set(row.delivery_key, Number(row.n));
      return counts;
    },
    close: () => fake.close(),
  });
}

/** Every GUID of `counts` stored exactly once: the map of those that are not, for a readable failure. */
export function notStoredOnce(counts: Map<string, number>): Record<string, number> {
  return Object.fromEntries([...counts].filter(([, n]) => n !== 1));
}

/** How many times each delivery id was asked to be redelivered, for those asked more than once. */
export function askedTwice(asks: readonly number[]): number[] {
  const seen = new Set<number>();
  return asks.filter((id) => (seen.has(id) ? true : (seen.add(id), false)));
}
