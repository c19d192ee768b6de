// Per-isolate cache of connection endpoints (secrets decrypted), so that a
// flood of requests to one endpoint, authenticated or not, costs one lookup
// per `ttlMs`. Unknown connections are cached too; concurrent misses share
// one query. A rotated secret takes effect within `ttlMs`.
import type { Database } from '../db/database.js';
import { decryptSecret, type KeyRing } from '../db/secret-box.js';
import { readConnectionEndpoint, type StoredEndpoint } from './sql/connection-secrets.js';

export interface ConnectionEndpoint extends Omit<StoredEndpoint, 'storedSigningKeys'> {
  /** Outline, Forgejo/Gitea, generic: the HMAC keys, current then previous. */
  signingKeys: string[];
}

export interface ConnectionCache {
  /** Rejects with a SecretKeyError when a stored key does not decrypt under the key ring. */
  get(connectionId: number): Promise<ConnectionEndpoint | undefined>;
}

interface Entry {
  expiresAt: number;
  value: Promise<ConnectionEndpoint | undefined>;
}

async function readDecrypted(database: Database, keyRing: Promise<KeyRing | undefined>, connectionId: number) {
  const stored = await readConnectionEndpoint(database, connectionId);
  if (!stored) return undefined;
  const { storedSigningKeys, ...endpoint } = stored;
  const ring = storedSigningKeys.length > 0 ? await keyRing : undefined;
  const signingKeys = await Promise.all(storedSigningKeys.map((key) => decryptSecret(ring, connectionId, key)));
  return { ...endpoint, signingKeys };
}

export function createConnectionCache(
  database: Database,
  options: { ttlMs: number; keyRing: Promise<KeyRing | undefined>; maxEntries?: number; now?: () => number },
): ConnectionCache {
  const entries = new Map<number, Entry>();
  const maxEntries = options.maxEntries ?? 10_000;
  const now = options.now ?? Date.now;
  return {
    get(connectionId) {
      const cached = entries.get(connectionId);
      if (cached && cached.expiresAt > now()) return cached.value;
      entries.delete(connectionId);
      // Map order is insertion order: the first key is the oldest entry.
      if (entries.size >= maxEntries) entries.delete(entries.keys().next().value!);
      const value = readDecrypted(database, options.keyRing, connectionId);
      entries.set(connectionId, { expiresAt: now() + options.ttlMs, value });
      // A failed lookup is not an answer: the next request asks again.
      value.catch(() => {
        if (entries.get(connectionId)?.value === value) entries.delete(connectionId);
      });
      return value;
    },
  };
}
