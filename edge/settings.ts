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
