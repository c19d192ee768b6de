// The edge's configuration, read from the Worker's bindings or process.env.
//
//   GITHUB_APP_<APP>_WEBHOOK_SECRET  secret of the GitHub App posting to /hooks/github/<app>
//   GITHUB_APP_<APP>_WEBHOOK_SECRET_PREVIOUS  the secret it replaced, still accepted while
//                                    the App's settings are being changed (remove it after)
//   GITHUB_APP_<APP>_SOURCE          its server (default https://github.com; GHES: its URL)
//   SLACK_APP_<APP>_SIGNING_SECRET   signing secret of the Slack app posting to /hooks/slack/<app>
//   SLACK_APP_<APP>_SIGNING_SECRET_PREVIOUS  likewise
//   SLACK_APP_<APP>_SOURCE           default https://slack.com
//   WHARF_MAX_BODY_BYTES             body size limit (default 25 MiB, GitHub's cap)
//   WHARF_MAX_INFLIGHT_BYTES         body bytes read at once before verification, across
//                                    requests (default 64 MiB); past it: 503 + Retry-After
//   WHARF_SECRET_CACHE_SECONDS       how long an isolate keeps a connection's secret (default 30)
//   WHARF_SECRET_KEYS                the key ring that decrypts connections' signing keys
//                                    (db/secret-box.ts)
//   WHARF_ADMIT_BATCH                Node only: how many deliveries one admission batch takes
//                                    while requests coalesce, `<deliveries>[,<bytes>]`, bytes
//                                    with an optional kB or MB (1024-based): default 64,1MB;
//                                    `off` (or a bound of 1 delivery): every request calls
//                                    wharf.admit itself, as the Worker does
//
// <APP> is the route's :app upper-cased, every character outside [A-Z0-9] as `_`.
import { parseKeyRing, type KeyRing } from '../db/secret-box.js';
import { defaultMaxBodyBytes } from './request-body.js';

export type EdgeEnv = Record<string, unknown>;

export interface EdgeSettings {
  maxBodyBytes: number;
  maxInflightBytes: number;
  secretCacheMs: number;
  /** Rejects with a SecretKeyError when WHARF_SECRET_KEYS is malformed (every lookup then answers 503). */
  keyRing: Promise<KeyRing | undefined>;
}

export function readEdgeSettings(env: EdgeEnv): EdgeSettings {
  const keyRing = parseKeyRing(env.WHARF_SECRET_KEYS);
  keyRing.catch(() => {});
  return {
    maxBodyBytes: positiveInteger(env.WHARF_MAX_BODY_BYTES) ?? defaultMaxBodyBytes,
    maxInflightBytes: positiveInteger(env.WHARF_MAX_INFLIGHT_BYTES) ?? 64 * 1024 * 1024,
    secretCacheMs: (positiveInteger(env.WHARF_SECRET_CACHE_SECONDS) ?? 30) * 1000,
    keyRing,
  };
}

/** The bound of one admission batch: deliveries, and bytes of their bodies (one larger body goes alone). */
export interface AdmitBatchBound {
  deliveries: number;
  bytes: number;
}

export const defaultAdmitBatch: AdmitBatchBound = { deliveries: 64, bytes: 1024 * 1024 };

const admitBatchPattern = /^\s*([0-9]+)\s*(?:,\s*([0-9]+)\s*(kb|mb)?\s*)?$/i;

/**
 * WHARF_ADMIT_BATCH: the batch bound, or undefined when coalescing is off.
 * Throws on a value it cannot read, so that a server does not start on a
 * bound its operator did not mean.
 */
export function readAdmitBatch(env: EdgeEnv): AdmitBatchBound | undefined {
  const text = env.WHARF_ADMIT_BATCH;
  if (text === undefined || text === '') return defaultAdmitBatch;
  if (typeof text === 'string' && text.trim().toLowerCase() === 'off') return undefined;
  const match = typeof text === 'string' ? admitBatchPattern.exec(text) : null;
  const deliveries = Number(match?.[1]);
  const unit = { kb: 1024, mb: 1024 * 1024 }[match?.[3]?.toLowerCase() ?? ''] ?? 1;
  const bytes = match?.[2] === undefined ? defaultAdmitBatch.bytes : Number(match[2]) * unit;
  if (!match || !Number.isSafeInteger(deliveries) || deliveries < 1 || !Number.isSafeInteger(bytes) || bytes < 1) {
    throw new Error(`WHARF_ADMIT_BATCH must be off or <deliveries>[,<bytes>[kB|MB]], e.g. 64,1MB; not ${JSON.stringify(text)}`);
  }
  return deliveries === 1 ? undefined : { deliveries, bytes };
}

const appName = /^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/;

const appSecretNames = {
  github: { secret: 'WEBHOOK_SECRET', prefix: 'GITHUB_APP_', defaultSource: 'https://github.com' },
  slack: { secret: 'SIGNING_SECRET', prefix: 'SLACK_APP_', defaultSource: 'https://slack.com' },
} as const;

/** The app's secrets (current, then previous) and source, or undefined when no such app is configured. */
export function readAppSecrets(
  env: EdgeEnv, provider: keyof typeof appSecretNames, app: string,
): { secrets: string[]; source: string } | undefined {
  if (!appName.test(app)) return undefined;
  const names = appSecretNames[provider];
  const stem = `${names.prefix}${app.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_`;
  const [secret, previous] = [env[`${stem}${names.secret}`], env[`${stem}${names.secret}_PREVIOUS`]];
  if (typeof secret !== 'string' || secret === '') return undefined;
  const secrets = typeof previous === 'string' && previous !== '' ? [secret, previous] : [secret];
  const source = env[`${stem}SOURCE`];
  return { secrets, source: typeof source === 'string' && source !== '' ? source : names.defaultSource };
}

function positiveInteger(value: unknown): number | undefined {
  const number = typeof value === 'string' ? Number(value) : typeof value === 'number' ? value : NaN;
  return Number.isSafeInteger(number) && number > 0 ? number : undefined;
}
