// Failed authentications, counted per client: past `maxFailures` within a
// window a client gets 429 until the window ends, whatever token it then
// presents (answering the right token with anything but 429 would tell a
// guesser it found it). Verifications still in flight count too: a client
// whose failures and verifications in flight reach the limit waits for one of
// them to end, so that a concurrent burst cannot slip past the count while
// the database looks tokens up, and a client with many good requests in
// flight is slowed for milliseconds, never refused. A success resets nothing, not even the client's own
// count: a workspace token's holder could otherwise interleave its own token
// with guesses at the admin token. Memory is bounded: at most `maxClients`
// clients are remembered; past that, clients not yet remembered share one
// overflow bucket, so that spraying from many addresses neither grows the map
// nor frees a blocked client. Runtime-neutral: no Node or Workers API.
import type { Context } from 'hono';

export interface AuthThrottleOptions {
  /** Failed authentications a client may make in one window; the next attempt is a 429. Default 10. */
  maxFailures?: number;
  /** The window, from a client's first failure, in milliseconds. Default 60 000. */
  windowMs?: number;
  /** Clients remembered at once. Default 10 000. */
  maxClients?: number;
  /** A clock in milliseconds (tests); performance.now() by default. */
  now?: () => number;
}

/** A client's key; undefined when the runtime tells nothing about who is calling. */
export type ClientKey = (c: Context) => string | undefined;

interface Entry {
  failures: number;
  /** Verifications begun and not yet ended. */
  pending: number;
  /** When the window that began with the client's first attempt ends. */
  until: number;
}

/** A verification begun: end it with AuthThrottle.end, whatever happens. */
export interface AuthAttempt {
  readonly key: string;
  readonly entry: Entry;
}

/** How long (ms) a client waits for its verifications in flight before it is told to retry. */
const maxPendingWaitMs = 10_000;
const pollMs = 5;

/** The key of callers the runtime tells nothing about: they all share it. */
export const sharedBucket = '*';

export class AuthThrottle {
  readonly maxFailures: number;
  readonly windowMs: number;
  readonly maxClients: number;
  readonly #now: () => number;
  // Every entry's window is as long and starts when the entry is made, so
  // insertion order is the order in which windows end: the expired entries
  // are always at the front.
  readonly #entries = new Map<string, Entry>();
  #overflow: Entry | undefined;

  constructor(options: AuthThrottleOptions = {}) {
    this.maxFailures = positiveInteger(options.maxFailures ?? 10, 'maxFailures');
    this.windowMs = positiveInteger(options.windowMs ?? 60_000, 'windowMs');
    this.maxClients = positiveInteger(options.maxClients ?? 10_000, 'maxClients');
    this.#now = options.now ?? (() => performance.now());
  }

  /** Clients remembered now (the overflow bucket counts as one). */
  get size(): number {
    return this.#entries.size + (this.#overflow ? 1 : 0);
  }

  /** Seconds the client must wait before it may try a token again; 0 when it may try now. */
  retryAfter(key: string): number {
    const now = this.#now();
    this.#expire(now);
    const entry = this.#find(key);
    if (!entry || entry.failures < this.maxFailures) return 0;
    return secondsUntil(entry.until, now);
  }

  /**
   * Begins verifying a token the client presents: an attempt to end with
   * end(), or the seconds it must wait (429) when it is blocked.
   */
  async begin(key: string): Promise<AuthAttempt | number> {
    for (let waited = 0; ; waited += pollMs) {
      const now = this.#now();
      this.#expire(now);
      const found = this.#find(key);
      if (found && found.failures >= this.maxFailures) return secondsUntil(found.until, now);
      if (!found || found.failures + found.pending < this.maxFailures) {
        const entry = found ?? this.#create(key, now);
        entry.pending++;
        return { key, entry };
      }
      if (waited >= maxPendingWaitMs) return 1;
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
  }

  /** Ends a verification: `failed` when the token was refused (not when the database could not say). */
  end(attempt: AuthAttempt, failed: boolean): void {
    attempt.entry.pending = Math.max(0, attempt.entry.pending - 1);
    if (failed) {
      this.recordFailure(attempt.key);
    } else if (attempt.entry.failures === 0 && attempt.entry.pending === 0
      && this.#entries.get(attempt.key) === attempt.entry) {
      // Nothing to remember about a client whose verifications all succeeded.
      this.#entries.delete(attempt.key);
    }
  }

  recordFailure(key: string): void {
    const now = this.#now();
    this.#expire(now);
    (this.#find(key) ?? this.#create(key, now)).failures++;
  }

  /** The client's entry, or the overflow bucket for a client the full map has no room for. */
  #find(key: string): Entry | undefined {
    return this.#entries.get(key) ?? (this.#entries.size >= this.maxClients ? this.#overflow : undefined);
  }

  #create(key: string, now: number): Entry {
    const entry: Entry = { failures: 0, pending: 0, until: now + this.windowMs };
    if (this.#entries.size < this.maxClients) {
      this.#entries.set(key, entry);
      return entry;
    }
    this.#overflow = entry;
    return entry;
  }

  #expire(now: number): void {
    for (const [key, entry] of this.#entries) {
      if (entry.until > now) break;
      this.#entries.delete(key);
    }
    if (this.#overflow && this.#overflow.until <= now) this.#overflow = undefined;
  }
}

function secondsUntil(until: number, now: number): number {
  return Math.max(1, Math.ceil((until - now) / 1000));
}

function positiveInteger(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 1) throw new Error(`authThrottle.${name} must be a positive integer`);
  return value;
}

/**
 * Who is calling, as far as the runtime knows without trusting anything the
 * client sends: on Node (@hono/node-server) the socket's remote address, as
 * its getConnInfo reads it; on Cloudflare Workers (where `request.cf` is set)
 * CF-Connecting-IP, which Cloudflare sets and a client cannot; else undefined
 * (all callers share one bucket). X-Forwarded-For is never read: behind a
 * reverse proxy, pass a clientKey that reads the proxy's header. IPv6 clients
 * are keyed by their /64, which one subscriber usually holds whole.
 */
export function defaultClientKey(c: Context): string | undefined {
  const address = nodeRemoteAddress(c.env) ?? cloudflareClientAddress(c);
  return address ? networkBucket(address) : undefined;
}

function nodeRemoteAddress(env: unknown): string | undefined {
  const bindings = field(env, 'server') ?? env;
  const address = field(field(field(bindings, 'incoming'), 'socket'), 'remoteAddress');
  return typeof address === 'string' && address !== '' ? address : undefined;
}

function cloudflareClientAddress(c: Context): string | undefined {
  const cf = field(c.req.raw, 'cf');
  if (typeof cf !== 'object' || cf === null) return undefined;
  return c.req.header('cf-connecting-ip')?.trim() || undefined;
}

function field(value: unknown, name: string): unknown {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[name] : undefined;
}

/** An address as a throttle key: IPv4 as it is (IPv4-mapped IPv6 too), IPv6 as its /64. */
export function networkBucket(address: string): string {
  const bare = address.replace(/%.*$/, '').toLowerCase();
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(bare);
  if (mapped) return mapped[1]!;
  if (!bare.includes(':')) return bare;
  const groups = ipv6Groups(bare);
  return groups ? `${groups.slice(0, 4).join(':')}::/64` : bare;
}

/** The eight groups of an IPv6 address, without leading zeros; undefined if it is none. */
function ipv6Groups(address: string): string[] | undefined {
  let text = address;
  const ipv4Tail = /(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (ipv4Tail) {
    const [a, b, c, d] = ipv4Tail.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, ipv4Tail.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const head = halves[0] ? halves[0].split(':') : [];
  const tail = halves.length === 2 && halves[1] ? halves[1].split(':') : [];
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  const groups = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill('0'), ...tail];
  if (!groups.every((group) => /^[0-9a-f]{1,4}$/.test(group))) return undefined;
  return groups.map((group) => group.replace(/^0+(?=.)/, ''));
}
