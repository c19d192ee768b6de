// The hashes of the live workspace tokens, kept in memory so that a token
// that is none of them is refused at the cost of a hash and a lookup: under
// a flood of wrong tokens the database sees a bounded number of reloads of
// this table, never a query per token.
//
// The table only ever refuses. A token it holds is still confirmed by
// wharf.verify_token (which records last_used_at), so a revoked token stops
// working at once. A token it lacks makes it reload, within a budget:
// `reloadBurst` reloads at once, then one per `reloadEveryMs`. So a token
// created by another process works at once while nobody floods, and within
// `reloadEveryMs` (1 s) while someone does.
//
// When the database's role may not read the table (no EXECUTE on
// wharf.live_token_hashes, or a database not yet migrated), every token is
// looked up as before, and the table is tried again after a minute.
import type { Database } from '../../db/database.js';
import { liveTokenHashes } from '../sql/operator.js';

export interface TokenTableOptions {
  /** Reloads that tokens missing from the table may cause at once. Default 5. */
  reloadBurst?: number;
  /** Past the burst, one more reload per this many milliseconds. Default 1000. */
  reloadEveryMs?: number;
  /** After the role was found unable to read the table, how long before it is tried again (ms). Default 60 000. */
  unreadableRetryMs?: number;
  /** A clock in milliseconds (tests); performance.now() by default. */
  now?: () => number;
  /** Told each time the table turns out unreadable for the database's role. */
  onUnreadable?: () => void;
}

export class TokenTable {
  readonly reloadBurst: number;
  readonly reloadEveryMs: number;
  readonly unreadableRetryMs: number;
  readonly #db: Database;
  readonly #now: () => number;
  readonly #onUnreadable: () => void;
  #hashes: Set<string> | undefined;
  /** The last reload's failure (the database unavailable): thrown to the tokens it could not rule out, until a reload succeeds. */
  #failure: { error: unknown } | undefined;
  #loading: Promise<void> | undefined;
  #unreadableUntil = -Infinity;
  #credits: number;
  #creditedAt: number;

  constructor(db: Database, options: TokenTableOptions = {}) {
    this.#db = db;
    this.reloadBurst = whole(options.reloadBurst ?? 5, 'reloadBurst');
    this.reloadEveryMs = whole(options.reloadEveryMs ?? 1000, 'reloadEveryMs');
    this.unreadableRetryMs = whole(options.unreadableRetryMs ?? 60_000, 'unreadableRetryMs');
    this.#now = options.now ?? (() => performance.now());
    this.#onUnreadable = options.onUnreadable ?? (() => {});
    this.#credits = this.reloadBurst;
    this.#creditedAt = this.#now();
  }

  /** Live tokens the table holds (undefined before its first load). */
  get size(): number | undefined {
    return this.#hashes?.size;
  }

  /**
   * False when no live token has this hash (tokenHashHex), which costs no
   * query; true when one may, for wharf.verify_token to decide. Throws the
   * database's failure when it cannot tell.
   */
  async mayBeLive(hash: string): Promise<boolean> {
    if (this.#hashes?.has(hash)) return true;
    // A reload under way is as fresh as this request can ask for.
    if (this.#loading) await this.#loading;
    else if (this.#mayReload()) await this.#reload();
    if (this.#now() < this.#unreadableUntil) return true;
    if (this.#failure) throw this.#failure.error;
    return this.#hashes?.has(hash) ?? false;
  }

  /** The database said this hash is no live token (revoked since the last load): refuse it without a query from now on. */
  forget(hash: string): void {
    this.#hashes?.delete(hash);
  }

  #reload(): Promise<void> {
    this.#loading = this.#load().finally(() => {
      this.#loading = undefined;
    });
    return this.#loading;
  }

  async #load(): Promise<void> {
    try {
      const hashes = await liveTokenHashes(this.#db);
      this.#failure = undefined;
      if (hashes === undefined) {
        this.#unreadableUntil = this.#now() + this.unreadableRetryMs;
        this.#onUnreadable();
        return;
      }
      this.#unreadableUntil = -Infinity;
      this.#hashes = new Set(hashes);
    } catch (error) {
      this.#failure = { error };
    }
  }

  /** Takes one reload from the budget (a token bucket of reloadBurst, refilled one per reloadEveryMs). */
  #mayReload(): boolean {
    const now = this.#now();
    if (now < this.#unreadableUntil) return false;
    this.#credits = Math.min(this.reloadBurst, this.#credits + (now - this.#creditedAt) / this.reloadEveryMs);
    this.#creditedAt = now;
    if (this.#credits < 1) return false;
    this.#credits -= 1;
    return true;
  }
}

function whole(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 1) throw new Error(`tokenTable.${name} must be a positive whole number`);
  return value;
}
