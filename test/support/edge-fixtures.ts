// Shared by the edge suites (Node and workerd): connections seeded through the
// SQL API, deliveries signed with the edge's own signing functions, and a
// logger and metrics that remember what they were told.
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import {
  signForgejoBody, signGitHubBody, signOutlineBody, signSlackRequest, signStandardWebhook,
} from '../../edge/adapters/index.js';
import type { EdgeLogger, EdgeMetrics } from '../../edge/telemetry.js';
import { encryptSecret, parseKeyRing } from '../../db/secret-box.js';
import type { Provider as AnyProvider } from '../../db/providers.js';
import { buildConnection } from './inbox-fixtures.js';

export const githubSecret = 'github-app-secret-for-tests';
export const slackSecret = 'slack-signing-secret-for-tests';
/** The key ring the edge decrypts connections' signing keys with (one fixed test key). */
export const testSecretKeys = 'test1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=';
export const edgeEnv = {
  GITHUB_APP_TEST_WEBHOOK_SECRET: githubSecret,
  SLACK_APP_TEST_SIGNING_SECRET: slackSecret,
  WHARF_SECRET_KEYS: testSecretKeys,
};

/** What wharf.set_connection_secret takes for a provider: a GitLab token as it is, a signing key encrypted. */
export async function storedSecret(provider: AnyProvider, connectionId: number | string, secret: string): Promise<string> {
  if (provider === 'gitlab') return secret;
  return encryptSecret((await parseKeyRing(testSecretKeys))!, connectionId, secret);
}

/** The providers the shared scenarios cover (test/edge/provider-adapters.test.ts covers the others). */
export type Provider = 'github' | 'gitlab' | 'slack' | 'outline' | 'forgejo' | 'generic';

let nextId = Math.floor(Math.random() * 1_000_000) * 1000;
/** A fresh id (workspace, installation, team) for one test. */
export function freshId(): number {
  return ++nextId;
}

/** inbox-fixtures.ts's buildConnection, with the provider's secret stored as the edge reads it (storedSecret). */
export async function seedConnection(
  pool: pg.Pool,
  c: { workspace: number; provider: AnyProvider; source: string; kind: string; externalId: string | null;
       route?: object; subjects: string[]; secret?: string },
): Promise<number> {
  const { secret, ...connection } = c;
  const id = await buildConnection(pool, connection);
  if (secret) await pool.query('SELECT wharf.set_connection_secret($1, $2)', [id, await storedSecret(c.provider, id, secret)]);
  return id;
}

export interface SignOptions {
  /** The delivery key where the provider sends it in a header. */
  deliveryKey: string;
  /** Sign with this instead of the endpoint's secret. */
  secret?: string;
  timestampMs?: number;
}

/**
 * One provider, set up for tests: where it posts, a work payload about a
 * subject, and how it signs. `seed` creates a source connection in
 * `workspace`; `seedRecipient` a second connection of the same provider and
 * source in another workspace (fan-out).
 */
export interface ProviderScenario {
  provider: Provider;
  timestamped: boolean;
  path: string;
  subject: string;
  payload(deliveryKey: string): Record<string, unknown>;
  /** Where the receipt's delivery_id comes from, given the signed delivery key. */
  sign(body: Uint8Array | string, options: SignOptions): Promise<Record<string, string>>;
  seedRecipient(pool: pg.Pool, workspace: number): Promise<number>;
}

export async function scenario(pool: pg.Pool, provider: Provider, workspace: number): Promise<ProviderScenario> {
  const id = freshId();
  const now = () => Date.now();
  switch (provider) {
    case 'github': {
      const source = 'https://github.com';
      const subject = `repo:acme/api-${id}`;
      await seedConnection(pool, { workspace, provider, source, kind: 'app_installation', externalId: String(id), subjects: [subject] });
      return {
        provider, timestamped: false, path: '/hooks/github/test', subject,
        // GitHub signs the body alone and Wharf deduplicates by it: every
        // delivery of a scenario carries its own body.
        payload: (deliveryKey) => ({ action: 'opened', installation: { id }, repository: { full_name: `acme/api-${id}`, owner: { login: 'acme' } },
                                     pull_request: { node_id: deliveryKey } }),
        async sign(body, o) {
          return { 'x-github-event': 'pull_request', 'x-github-delivery': o.deliveryKey,
                   'x-hub-signature-256': await signGitHubBody(o.secret ?? githubSecret, bytes(body)) };
        },
        seedRecipient: (p, ws) => seedConnection(p, { workspace: ws, provider, source, kind: 'pat', externalId: `pat-${ws}`, subjects: [subject] }),
      };
    }
    case 'gitlab': {
      const source = `https://gitlab-${id}.example.com`;
      const token = `glpat-token-${id}`;
      const subject = `project:acme/api`;
      const connection = await seedConnection(pool, { workspace, provider, source, kind: 'webhook', externalId: String(id), subjects: [subject], secret: token });
      return {
        provider, timestamped: false, path: `/hooks/gitlab/${connection}`, subject,
        payload: () => ({ object_kind: 'merge_request', project: { path_with_namespace: 'acme/api' } }),
        async sign(_body, o) {
          return { 'x-gitlab-event': 'Merge Request Hook', 'x-gitlab-event-uuid': o.deliveryKey, 'x-gitlab-token': o.secret ?? token };
        },
        seedRecipient: (p, ws) => seedConnection(p, { workspace: ws, provider, source, kind: 'webhook', externalId: `other-${ws}`, subjects: [subject] }),
      };
    }
    case 'slack': {
      const source = 'https://slack.com';
      const team = `T${id}`;
      const subject = `channel:C${id}`;
      await seedConnection(pool, { workspace, provider, source, kind: 'slack_team', externalId: team, subjects: [subject] });
      return {
        provider, timestamped: true, path: '/hooks/slack/test', subject,
        payload: (deliveryKey) => ({ type: 'event_callback', team_id: team, event_id: deliveryKey,
                                     event: { type: 'message', channel: `C${id}`, text: 'hello' } }),
        async sign(body, o) {
          const ts = Math.floor((o.timestampMs ?? now()) / 1000);
          return { 'x-slack-request-timestamp': String(ts),
                   'x-slack-signature': await signSlackRequest(o.secret ?? slackSecret, ts, bytes(body)) };
        },
        seedRecipient: (p, ws) => seedConnection(p, { workspace: ws, provider, source, kind: 'slack_user', externalId: `U${ws}`, subjects: [subject] }),
      };
    }
    case 'outline': {
      const source = `https://outline-${id}.example.com`;
      const secret = `ol_whs_${id}`;
      const subject = `document:doc-${id}`;
      const connection = await seedConnection(pool, { workspace, provider, source, kind: 'webhook', externalId: String(id), subjects: [subject], secret });
      return {
        provider, timestamped: true, path: `/hooks/outline/${connection}`, subject,
        payload: (deliveryKey) => ({ id: deliveryKey, event: 'documents.update', actorId: 'user-1',
                                     payload: { id: `doc-${id}`, model: { id: `doc-${id}`, collectionId: `col-${id}` } } }),
        async sign(body, o) {
          return { 'outline-signature': await signOutlineBody(o.secret ?? secret, bytes(body), o.timestampMs ?? now()) };
        },
        seedRecipient: (p, ws) => seedConnection(p, { workspace: ws, provider, source, kind: 'webhook', externalId: `other-${ws}`, subjects: [subject] }),
      };
    }
    case 'forgejo': {
      const source = `https://forgejo-${id}.example.com`;
      const secret = `forgejo-secret-${id}`;
      const subject = `repo:acme/api`;
      const connection = await seedConnection(pool, { workspace, provider, source, kind: 'webhook', externalId: String(id), subjects: [subject], secret });
      return {
        provider, timestamped: false, path: `/hooks/forgejo/${connection}`, subject,
        payload: (deliveryKey) => ({ action: 'opened', repository: { full_name: 'acme/api', owner: { login: 'acme' } },
                                     pull_request: { id: deliveryKey } }),
        async sign(body, o) {
          return { 'x-forgejo-event': 'pull_request', 'x-forgejo-delivery': o.deliveryKey,
                   'x-forgejo-signature': await signForgejoBody(o.secret ?? secret, bytes(body)) };
        },
        seedRecipient: (p, ws) => seedConnection(p, { workspace: ws, provider, source, kind: 'webhook', externalId: `other-${ws}`, subjects: [subject] }),
      };
    }
    case 'generic': {
      const source = `https://sender-${id}.example.com`;
      const secret = `whsec_${Buffer.from(`generic-key-${id}`).toString('base64')}`;
      const subject = `customer_id:cus_${id}`;
      const connection = await seedConnection(pool, {
        workspace, provider, source, kind: 'webhook', externalId: String(id), subjects: [subject], secret,
        route: { subject_pointers: ['/data/customer_id'] },
      });
      return {
        provider, timestamped: true, path: `/hooks/generic/${connection}`, subject,
        payload: () => ({ type: 'invoice.paid', timestamp: new Date().toISOString(), data: { customer_id: `cus_${id}` } }),
        async sign(body, o) {
          const ts = Math.floor((o.timestampMs ?? now()) / 1000);
          return { 'webhook-id': o.deliveryKey, 'webhook-timestamp': String(ts),
                   'webhook-signature': await signStandardWebhook(o.secret ?? secret, o.deliveryKey, ts, bytes(body)) };
        },
        seedRecipient: (p, ws) => seedConnection(p, {
          workspace: ws, provider, source, kind: 'webhook', externalId: `other-${ws}`, subjects: [subject],
          route: { subject_pointers: ['/data/customer_id'] },
        }),
      };
    }
  }
}

export const providers: Provider[] = ['github', 'gitlab', 'slack', 'outline', 'forgejo', 'generic'];

function bytes(body: Uint8Array | string): Uint8Array<ArrayBuffer> {
  return typeof body === 'string' ? new TextEncoder().encode(body) : new Uint8Array(body);
}

export function newDeliveryKey(): string {
  return randomUUID();
}

export interface Recorded {
  logger: EdgeLogger;
  metrics: EdgeMetrics;
  lines: { level: string; fields: Record<string, unknown>; message: string }[];
  rejected: string[];
}

export function recorder(): Recorded {
  const lines: Recorded['lines'] = [];
  const rejected: string[] = [];
  const log = (level: string) => (fields: Record<string, unknown>, message: string) => {
    lines.push({ level, fields, message });
  };
  return { logger: { debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error') }, metrics: { rejected: (r) => rejected.push(r) }, lines, rejected };
}

export async function countEvents(pool: pg.Pool, deliveryKey?: string): Promise<number> {
  const { rows } = await pool.query<{ n: string }>(
    'SELECT count(*) AS n FROM wharf.provider_event WHERE $1::text IS NULL OR delivery_key = $1',
    [deliveryKey ?? null],
  );
  return Number(rows[0]!.n);
}
