// Per-isolate cache of connection endpoints (secrets decrypted), so that a
// flood of requests to one endpoint, authenticated or not, costs one lookup
// per `ttlMs`; concurrent misses of one id share one query. A rotated secret
// takes effect within `ttlMs`.
//
// Connections that exist and ids that name none are kept apart, each bounded
// and evicting only its own kind: requests to made-up ids (each costs one
// indexed lookup, as a known connection's miss does, and no decryption) can
// fill the unknown side but never push a live connection out.
import type { Database } from '../db/database.js';
import { decryptSecret, type KeyRing } from '../db/secret-box.js';
import { readConnectionEndpoint, type StoredEndpoint } from './sql/connection-secrets.js';

export interface ConnectionEndpoint extends Omit<StoredEndpoint, 'storedSigningKeys'> {
  /** Outline, Forgejo/Gitea, generic and the other signing-key providers: the HMAC keys, current then previous. */
  signingKeys: string[];
}

export interface ConnectionCache {
  /** Rejects with a SecretKeyError when a stored key does not decrypt under the key ring. */
  get(connectionId: number): Promise<ConnectionEndpoint | undefined>;
}

async function readDecrypted(database: Database, keyRing: Promise<KeyRing | undefined>, connectionId: number) {
  const stored = await readConnectionEndpoint(database, connectionId);
  if (!stored) return undefined;
  const { storedSigningKeys, ...endpoint } = stored;
  const ring = storedSigningKeys.length > 0 ? await keyRing : undefined;
  const signingKeys = await Promise.all(storedSigningKeys.map((key) => decryptSecret(ring, connectionId, key)));
  return { ...endpoint, signingKeys };
}

/** A map of at most `max` entries that expire; the oldest entry makes room for a new one. */
class ExpiringMap<V> {
  private readonly entries = new Map<number, { expiresAt: number; value: V }>();
  constructor(private readonly max: number, private readonly now: () => number) {}

  get(key: number): V | undefined {
    const entry = this.entries.get(key);
    if (entry && entry.expiresAt > this.now()) return entry.value;
    if (entry) this.entries.delete(key);
    return undefined;
  }

  set(key: number, value: V, ttlMs: number): void {
    this.entries.delete(key);
    // Map order is insertion order: the first key is the oldest entry.
    if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { expiresAt: this.now() + ttlMs, value });
  }

  delete(key: number): void {
    this.entries.delete(key);
  }

}

export function createConnectionCache(
  database: Database,
  options: {
    ttlMs: number; keyRing: Promise<KeyRing | undefined>;
    /** Connections that exist, kept at once. */
    maxEntries?: number;
    /** Ids that name no connection, kept at once (apart from the connections). */
    maxUnknown?: number;
    now?: () => number;
  },
): ConnectionCache {
  const now = options.now ?? Date.now;
  const known = new ExpiringMap<ConnectionEndpoint>(options.maxEntries ?? 10_000, now);
  const unknown = new ExpiringMap<true>(options.maxUnknown ?? 10_000, now);
  // Lookups in flight, shared by concurrent misses of one id; each leaves
  // this map when it settles, so its size is bounded by the requests open.
  const pending = new Map<number, Promise<ConnectionEndpoint | undefined>>();
  return {
    get(connectionId) {
      const found = known.get(connectionId);
      if (found) return Promise.resolve(found);
      if (unknown.get(connectionId)) return Promise.resolve(undefined);
      const inFlight = pending.get(connectionId);
      if (inFlight) return inFlight;
      const lookup = readDecrypted(database, options.keyRing, connectionId);
      pending.set(connectionId, lookup);
      // A failed lookup is not an answer: the next request asks again.
      lookup.then((endpoint) => {
        if (endpoint) known.set(connectionId, endpoint, options.ttlMs);
        else unknown.set(connectionId, true, options.ttlMs);
      }, () => {}).finally(() => pending.delete(connectionId));
      return lookup;
    },
  };
}
