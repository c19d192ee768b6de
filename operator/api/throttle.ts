// Failed authentications, counted per client, and what they cost it. Only
// failures come here: a valid token is recognised before the throttle is
// asked anything (authenticator.ts), so no count, delay or 429 ever reaches
// its holder, whatever its address has sent. Tokens carry at least 192
// random bits, so a guess cannot succeed and answering a valid token with
// 200 tells a guesser nothing.
//
// Within a window (from the client's first failure), the first `slowAfter`
// failures are answered at once, the next ones up to `maxFailures` are
// answered after a delay that doubles each time (up to `maxDelayMs`), and
// every later one gets 429 with Retry-After at once, until the window ends.
//
// Memory is bounded: at most `maxClients` clients are remembered, each an
// entry of a key (an address) and two numbers. A new client past that makes
// the throttle forget the client whose window ends first: a flood sprayed
// from more addresses than that may free a guesser early, which costs
// nothing but another round of refusals. There is no bucket shared by
// clients the throttle has no room for. Callers the runtime tells nothing
// about (no address) are counted together, under `unknownClient`.
// Runtime-neutral: no Node or Workers API.

export interface AuthThrottleOptions {
  /** Failed authentications a client may make in one window; the ones after it are answered 429. Default 10. */
  maxFailures?: number;
  /** Failures answered without delay; those after them, up to maxFailures, are slowed. Default 5. */
  slowAfter?: number;
  /** The delay of the first slowed failure, in milliseconds; each next one waits twice as long. Default 250. */
  delayMs?: number;
  /** The longest delay of one failure, in milliseconds. Default 2000. */
  maxDelayMs?: number;
  /**
   * Refusals delayed at once, across clients. Past it the next refusals are
   * answered at once: the delay is a cost to a guesser, not something to
   * hold memory for under a flood. Default 1000.
   */
  maxDelayed?: number;
  /** The window, from a client's first failure, in milliseconds. Default 60 000. */
  windowMs?: number;
  /** Clients remembered at once. Default 10 000. */
  maxClients?: number;
  /** A clock in milliseconds (tests); performance.now() by default. */
  now?: () => number;
  /** Waits this many milliseconds (tests); setTimeout by default. */
  sleep?: (ms: number) => Promise<void>;
}

/** The key under which callers the runtime tells nothing about are counted. */
export const unknownClient = '*';

interface Entry {
  failures: number;
  /** When the window that began with the client's first failure ends. */
  until: number;
}

export class AuthThrottle {
  readonly maxFailures: number;
  readonly slowAfter: number;
  readonly delayMs: number;
  readonly maxDelayMs: number;
  readonly maxDelayed: number;
  readonly windowMs: number;
  readonly maxClients: number;
  readonly #now: () => number;
  readonly #sleep: (ms: number) => Promise<void>;
  // Every window is as long and starts when its entry is made, so insertion
  // order is the order in which windows end: expired entries, and the one
  // to forget when the map is full, are always at the front.
  readonly #entries = new Map<string, Entry>();
  #delayed = 0;

  constructor(options: AuthThrottleOptions = {}) {
    this.maxFailures = whole(options.maxFailures ?? 10, 'maxFailures', 1);
    this.slowAfter = whole(options.slowAfter ?? Math.min(5, this.maxFailures), 'slowAfter', 0);
    if (this.slowAfter > this.maxFailures) throw new Error('authThrottle.slowAfter must not exceed maxFailures');
    this.delayMs = whole(options.delayMs ?? 250, 'delayMs', 0);
    this.maxDelayMs = whole(options.maxDelayMs ?? 2000, 'maxDelayMs', 0);
    this.maxDelayed = whole(options.maxDelayed ?? 1000, 'maxDelayed', 0);
    this.windowMs = whole(options.windowMs ?? 60_000, 'windowMs', 1);
    this.maxClients = whole(options.maxClients ?? 10_000, 'maxClients', 1);
    this.#now = options.now ?? (() => performance.now());
    this.#sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  /** Clients remembered now. */
  get size(): number {
    return this.#entries.size;
  }

  /** Refusals being delayed now. */
  get delayed(): number {
    return this.#delayed;
  }

  /** The client's failures in its current window (0 when it has none, or was forgotten). */
  failures(key: string): number {
    this.#expire(this.#now());
    return this.#entries.get(key)?.failures ?? 0;
  }

  /**
   * Counts a failed authentication of the client and makes it pay: resolves
   * with the Retry-After seconds of a 429 once it is past maxFailures, else
   * with undefined when its 401 may go out (after the delay, if it is slowed).
   */
  async refuse(key: string): Promise<number | undefined> {
    const now = this.#now();
    this.#expire(now);
    const entry = this.#entries.get(key) ?? this.#remember(key, now);
    entry.failures = Math.min(entry.failures + 1, this.maxFailures + 1);
    if (entry.failures > this.maxFailures) return Math.max(1, Math.ceil((entry.until - now) / 1000));
    const delay = this.delayOf(entry.failures);
    if (delay > 0 && this.#delayed < this.maxDelayed) {
      this.#delayed++;
      try {
        await this.#sleep(delay);
      } finally {
        this.#delayed--;
      }
    }
    return undefined;
  }

  /** How long the client's failure number `failure` (from 1) is delayed, in milliseconds. */
  delayOf(failure: number): number {
    if (failure <= this.slowAfter) return 0;
    return Math.min(this.maxDelayMs, this.delayMs * 2 ** Math.min(failure - this.slowAfter - 1, 30));
  }

  #remember(key: string, now: number): Entry {
    if (this.#entries.size >= this.maxClients) {
      const first = this.#entries.keys().next();
      if (!first.done) this.#entries.delete(first.value);
    }
    const entry: Entry = { failures: 0, until: now + this.windowMs };
    this.#entries.set(key, entry);
    return entry;
  }

  #expire(now: number): void {
    for (const [key, entry] of this.#entries) {
      if (entry.until > now) break;
      this.#entries.delete(key);
    }
  }
}

function whole(value: number, name: string, min: number): number {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new Error(`authThrottle.${name} must be a whole number of at least ${min}`);
  }
  return value;
}
