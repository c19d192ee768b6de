// Per-isolate cache of connection endpoints (secrets included), so that a
// flood of requests to one endpoint, authenticated or not, costs one lookup
// per `ttlMs`. Unknown connections are cached too; concurrent misses share
// one query. A rotated secret takes effect within `ttlMs`.
import type { Database } from '../db/database.js';
import { readConnectionEndpoint, type ConnectionEndpoint } from './sql/connection-secrets.js';

export interface ConnectionCache {
  get(connectionId: number): Promise<ConnectionEndpoint | undefined>;
}

interface Entry {
  expiresAt: number;
  value: Promise<ConnectionEndpoint | undefined>;
}

export function createConnectionCache(
  database: Database,
  options: { ttlMs: number; maxEntries?: number; now?: () => number },
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
      const value = readConnectionEndpoint(database, connectionId);
      entries.set(connectionId, { expiresAt: now() + options.ttlMs, value });
      // A failed lookup is not an answer: the next request asks again.
      value.catch(() => {
        if (entries.get(connectionId)?.value === value) entries.delete(connectionId);
      });
      return value;
    },
  };
}
