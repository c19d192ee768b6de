// The sustained load: deliveries arrive at a fixed rate, spread round-robin
// over the scopes, each scope carrying its own sequence number in the payload.
// A scope sends its deliveries one at a time, in order, as a provider's
// per-object stream does: the next only once the previous was acknowledged. A
// refusal (503) or no answer is retried after the Retry-After it named, capped
// at `retryCapMs` (a provider that retries soon, so that the recovery the
// report shows is Wharf's, not a long back-off's). Every answer is kept.
// `rate: 'saturate'` is the capacity probe's load: every scope always has
// its next delivery waiting, so that the system takes as many as it can.
import { request, Agent } from 'node:http';
import type pg from 'pg';
import { signGitHubBody } from '../../edge/adapters/index.js';
import { makePayload } from '../payload.js';
import { addGraphileJob } from '../systems/graphile.js';
import { subjectOf } from '../systems/wharf-inbox.js';

export interface Delivery {
  scope: number;
  seq: number;
}

export type Outcome =
  | { kind: 'accepted'; status: number; eventId?: string }
  | { kind: 'refused'; status: number; retryAfter: string | null }
  | { kind: 'no-answer'; reason: 'timeout' | 'transport'; code?: string; reused?: boolean };

export interface Answer extends Delivery {
  /** When the answer came, ms since the load started. */
  at: number;
  /** How long the request took, ms. */
  ms: number;
  outcome: Outcome;
}

export interface Acknowledged extends Delivery {
  /** The event id the receipt named (Wharf). */
  eventId?: string;
}

export type Send = (delivery: Delivery) => Promise<Outcome>;

interface Lane {
  pending: number[];
  busy: boolean;
  next: number;
}

export class FixedRateLoad {
  readonly answers: Answer[] = [];
  readonly acknowledged: Acknowledged[] = [];
  /** Arrivals per second since the start. */
  readonly offered: number[] = [];
  private readonly lanes: Lane[];
  private startedAt = 0;
  private emitted = 0;
  private ticker: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly running = new Set<Promise<void>>();

  constructor(
    private readonly options: { rate: number | 'saturate'; scopes: number; retryCapMs: number; send: Send },
  ) {
    this.lanes = Array.from({ length: options.scopes }, () => ({ pending: [], busy: false, next: 0 }));
  }

  /** Starts the arrivals; `t0` (epoch ms) is the origin of every `at`. */
  start(t0: number): void {
    this.startedAt = t0;
    // Every 10 ms, whatever arrivals fell due since: a fixed schedule that a
    // late timer catches up with rather than drifts from.
    this.ticker = setInterval(() => this.arrive(), 10);
  }

  private arrive(): void {
    const elapsed = Date.now() - this.startedAt;
    if (this.options.rate === 'saturate') {
      this.lanes.forEach((lane, scope) => {
        if (lane.pending.length === 0) this.offer(scope, lane, elapsed);
      });
      return;
    }
    const due = Math.floor((elapsed * this.options.rate) / 1000);
    for (; this.emitted < due; this.emitted += 1) {
      const scope = this.emitted % this.options.scopes;
      this.offer(scope, this.lanes[scope]!, elapsed);
    }
  }

  /** The scope's next delivery arrives, and goes out unless the scope is still sending one. */
  private offer(scope: number, lane: Lane, elapsed: number): void {
    this.enqueue(lane, elapsed);
    if (!lane.busy) this.track(this.drive(scope, lane));
  }

  private enqueue(lane: Lane, elapsed: number): void {
    lane.pending.push(lane.next);
    lane.next += 1;
    const second = Math.floor(elapsed / 1000);
    this.offered[second] = (this.offered[second] ?? 0) + 1;
  }

  private track(work: Promise<void>): void {
    this.running.add(work);
    void work.finally(() => this.running.delete(work));
  }

  private async drive(scope: number, lane: Lane): Promise<void> {
    lane.busy = true;
    try {
      while (lane.pending.length > 0) {
        const seq = lane.pending[0]!;
        const began = Date.now();
        const outcome = await this.options.send({ scope, seq });
        const now = Date.now();
        this.answers.push({ scope, seq, at: now - this.startedAt, ms: now - began, outcome });
        if (outcome.kind === 'accepted') {
          lane.pending.shift();
          this.acknowledged.push({ scope, seq, ...(outcome.eventId !== undefined ? { eventId: outcome.eventId } : {}) });
          // Saturating: the scope's next delivery is there as soon as this one is taken.
          if (this.options.rate === 'saturate' && !this.stopped && lane.pending.length === 0) {
            this.enqueue(lane, now - this.startedAt);
          }
          continue;
        }
        const asked = outcome.kind === 'refused' ? Number(outcome.retryAfter) * 1000 : NaN;
        await sleep(Number.isFinite(asked) && asked >= 0 ? Math.min(asked, this.options.retryCapMs) : this.options.retryCapMs);
      }
    } finally {
      lane.busy = false;
    }
  }

  /**
   * No more arrivals; waits (up to `timeoutMs`) until every scope has had its
   * pending deliveries acknowledged. Returns how many never were.
   */
  async stop(timeoutMs: number): Promise<number> {
    this.stopped = true;
    clearInterval(this.ticker);
    const deadline = Date.now() + timeoutMs;
    while (this.running.size > 0 && Date.now() < deadline) await sleep(50);
    return this.lanes.reduce((sum, lane) => sum + lane.pending.length, 0);
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Signed GitHub push deliveries to the Node receiver's app endpoint
 * (`/hooks/github/<app>`), each on a connection of its own, as a provider
 * sends them: a kept-alive socket that the server closes as a request goes
 * out on it fails with ECONNRESET (Node's documented keep-alive race), a
 * client's artefact that the reduced run saw a dozen times and that would
 * pass for the receiver failing. A request the receiver has not answered
 * after `hangMs` is a hang: given up and retried.
 */
export function receiverSender(options: { url: string; app: string; secret: string; hangMs: number }): { send: Send; close(): void } {
  const agent = new Agent({ keepAlive: false });
  const endpoint = new URL(`/hooks/github/${options.app}`, options.url);
  const send: Send = async ({ scope, seq }) => {
    const body = JSON.stringify(makePayload(subjectOf(scope), seq));
    const signature = await signGitHubBody(options.secret, body);
    return new Promise<Outcome>((resolve) => {
      let settled = false;
      const settle = (outcome: Outcome): void => {
        if (settled) return;
        settled = true;
        resolve(outcome);
      };
      const req = request(endpoint, {
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          'x-github-event': 'push',
          'x-github-delivery': `scenario-${scope}-${seq}`,
          'x-hub-signature-256': signature,
        },
      }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('error', (error: NodeJS.ErrnoException) => settle({ kind: 'no-answer', reason: 'transport', code: error.code ?? error.name }));
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          if (status === 202) {
            let eventId: string | undefined;
            try {
              const receipt = JSON.parse(text) as { events?: Array<{ event_id?: unknown }> };
              const id = receipt.events?.[0]?.event_id;
              if (id !== undefined && id !== null) eventId = String(id);
            } catch {
              // A 202 without a readable receipt: the row check finds it missing.
            }
            settle({ kind: 'accepted', status, ...(eventId !== undefined ? { eventId } : {}) });
          } else {
            const retryAfter = res.headers['retry-after'];
            settle({ kind: 'refused', status, retryAfter: typeof retryAfter === 'string' ? retryAfter : null });
          }
        });
      });
      const timer = setTimeout(() => {
        settle({ kind: 'no-answer', reason: 'timeout' });
        req.destroy();
      }, options.hangMs);
      req.on('close', () => clearTimeout(timer));
      // `reused`: sent on a kept-alive socket, which the server may have closed just before.
      req.on('error', (error: NodeJS.ErrnoException) => settle({
        kind: 'no-answer', reason: 'transport', code: error.code ?? error.name, reused: req.reusedSocket,
      }));
      req.end(body);
    });
  };
  return { send, close: () => agent.destroy() };
}

/**
 * graphile-worker's producer: `graphile_worker.add_job` into the scope's named
 * queue (its per-key order), as an application adds a job; a failed call is a
 * refusal to retry.
 */
export function graphileSender(pool: pg.Pool): Send {
  return async ({ scope, seq }) => {
    try {
      await addGraphileJob(pool, { key: subjectOf(scope), seq }, true);
      return { kind: 'accepted', status: 0 };
    } catch {
      return { kind: 'refused', status: 0, retryAfter: null };
    }
  };
}
