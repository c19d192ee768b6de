// The edge's configuration, read from the Worker's bindings or process.env.
// The variables, their defaults and meanings are declared in
// db/environment.ts (docs/configuration.md): the app secrets
// GITHUB_APP_<APP>_WEBHOOK_SECRET[_PREVIOUS], SLACK_APP_<APP>_SIGNING_SECRET[_PREVIOUS]
// and their _SOURCE, WHARF_MAX_BODY_BYTES, WHARF_MAX_INFLIGHT_BYTES,
// WHARF_SECRET_CACHE_SECONDS, WHARF_SECRET_KEYS and (Node only) WHARF_ADMIT_BATCH.
import { parsePositiveInteger } from '../db/numbers.js';
import { parseKeyRing, type KeyRing } from '../db/secret-box.js';
import { appNamePattern, appVariable, environment } from '../db/environment.js';

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
    maxBodyBytes: parsePositiveInteger(env.WHARF_MAX_BODY_BYTES) ?? environment.WHARF_MAX_BODY_BYTES.default,
    maxInflightBytes: parsePositiveInteger(env.WHARF_MAX_INFLIGHT_BYTES) ?? environment.WHARF_MAX_INFLIGHT_BYTES.default,
    secretCacheMs: (parsePositiveInteger(env.WHARF_SECRET_CACHE_SECONDS) ?? environment.WHARF_SECRET_CACHE_SECONDS.default) * 1000,
    keyRing,
  };
}

/** The bound of one admission batch: deliveries, and bytes of their bodies (one larger body goes alone). */
export interface AdmitBatchBound {
  deliveries: number;
  bytes: number;
}

const admitBatchPattern = /^\s*([0-9]+)\s*(?:,\s*([0-9]+)\s*(kb|mb)?\s*)?$/i;

/**
 * WHARF_ADMIT_BATCH: the batch bound, or undefined when coalescing is off.
 * Throws on a value it cannot read, so that a server does not start on a
 * bound its operator did not mean.
 */
export function readAdmitBatch(env: EdgeEnv): AdmitBatchBound | undefined {
  const given = env.WHARF_ADMIT_BATCH;
  const text = given === undefined || given === '' ? environment.WHARF_ADMIT_BATCH.default : given;
  if (typeof text === 'string' && text.trim().toLowerCase() === 'off') return undefined;
  const match = typeof text === 'string' ? admitBatchPattern.exec(text) : null;
  const deliveries = Number(match?.[1]);
  const unit = { kb: 1024, mb: 1024 * 1024 }[match?.[3]?.toLowerCase() ?? ''] ?? 1;
  const bytes = match?.[2] === undefined ? 1024 * 1024 : Number(match[2]) * unit;
  if (!match || !Number.isSafeInteger(deliveries) || deliveries < 1 || !Number.isSafeInteger(bytes) || bytes < 1) {
    throw new Error(`WHARF_ADMIT_BATCH must be off or <deliveries>[,<bytes>[kB|MB]], e.g. 64,1MB; not ${JSON.stringify(text)}`);
  }
  return deliveries === 1 ? undefined : { deliveries, bytes };
}

/** The variables of an app-keyed provider's app: its secrets, and the source its deliveries are stored under. */
export const appVariables = {
  github: {
    secret: 'GITHUB_APP_<APP>_WEBHOOK_SECRET',
    previous: 'GITHUB_APP_<APP>_WEBHOOK_SECRET_PREVIOUS',
    source: 'GITHUB_APP_<APP>_SOURCE',
  },
  slack: {
    secret: 'SLACK_APP_<APP>_SIGNING_SECRET',
    previous: 'SLACK_APP_<APP>_SIGNING_SECRET_PREVIOUS',
    source: 'SLACK_APP_<APP>_SOURCE',
  },
} as const;

/** The app's secrets (current, then previous) and source, or undefined when no such app is configured. */
export function readAppSecrets(
  env: EdgeEnv, provider: keyof typeof appVariables, app: string,
): { secrets: string[]; source: string } | undefined {
  if (!appNamePattern.test(app)) return undefined;
  const names = appVariables[provider];
  const [secret, previous] = [env[appVariable(names.secret, app)], env[appVariable(names.previous, app)]];
  if (typeof secret !== 'string' || secret === '') return undefined;
  const secrets = typeof previous === 'string' && previous !== '' ? [secret, previous] : [secret];
  const source = env[appVariable(names.source, app)];
  return { secrets, source: typeof source === 'string' && source !== '' ? source : environment[names.source].default };
}
