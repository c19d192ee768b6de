// The two calls the sweeper makes to GitHub's REST API for an App's webhook
// deliveries, through Octokit's request and App authentication (a JWT signed
// with the App's private key, renewed before it expires):
//
//   GET  /app/hook/deliveries?per_page=100&cursor=…    newest first, cursor paging (Link: rel="next")
//   POST /app/hook/deliveries/{delivery_id}/attempts   asks GitHub to redeliver one delivery
//
// Rate limits are honoured as GitHub documents them: a 403 or 429 with
// Retry-After waits that long, one with x-ratelimit-remaining: 0 waits until
// x-ratelimit-reset, a secondary limit without either waits a minute. A wait
// longer than the caller allows is an error (the sweep stops and resumes
// later) rather than a process asleep for an hour. A listing that got a 5xx
// or no answer is tried again a few times, honouring Retry-After too; a
// redelivery request is not, since GitHub may have acted on it: the sweep
// stops instead, and the next one asks again only if the delivery is still
// not stored.
import { createAppAuth } from '@octokit/auth-app';
import { request as octokitRequest } from '@octokit/request';
import type { GitHubAppConfig } from './config.js';

export interface HookDelivery {
  /** GitHub's id of this attempt (a redelivery is a new attempt with a new id). */
  id: string;
  /** The X-GitHub-Delivery GUID, the same for the original and every redelivery. */
  guid: string;
  deliveredAt: Date;
  redelivery: boolean;
  status: string;
  statusCode: number;
  event: string;
  action: string | null;
}

export interface DeliveryPage {
  deliveries: HookDelivery[];
  /** GitHub's cursor of the next (older) page; undefined on the last page. */
  nextCursor: string | undefined;
}

export interface GitHubAppClient {
  listDeliveries(cursor: string | undefined, signal?: AbortSignal): Promise<DeliveryPage>;
  redeliver(deliveryId: string, signal?: AbortSignal): Promise<void>;
}

/**
 * Why a call to GitHub failed, as the sweeper answers it:
 * - `rate-limited`: GitHub asks for a longer wait than allowed; try later;
 * - `unavailable`: 5xx or no answer, after the retries; try later;
 * - `unauthorized`: 401, or 403 that is not a rate limit (a wrong App id or
 *   key, or a missing permission): an operator must fix the configuration;
 * - `rejected`: another 4xx, about this one request (e.g. a delivery too old
 *   to redeliver, or a cursor GitHub no longer knows).
 */
export type GitHubFailure = 'rate-limited' | 'unavailable' | 'unauthorized' | 'rejected';

export class GitHubApiError extends Error {
  override name = 'GitHubApiError';
  constructor(readonly failure: GitHubFailure, readonly status: number | undefined, message: string) {
    super(message);
  }
}

export interface GitHubClientOptions {
  /** The longest rate-limit or Retry-After wait to sit out before failing with `rate-limited` (default 60 s). */
  maxWaitMs?: number;
  /** Each HTTP request's own timeout (default 30 s). */
  requestTimeoutMs?: number;
  /** Tries of a listing that got a 5xx or no answer (default 3). */
  attempts?: number;
  /** Called before each wait, for logs. */
  onWait?: (wait: { ms: number; reason: 'rate-limit' | 'retry' }) => void;
  userAgent?: string;
}

interface ErrorLike {
  status?: unknown;
  message?: unknown;
  response?: { headers?: Record<string, string | number | undefined> };
}

export function createGitHubAppClient(config: GitHubAppConfig, options: GitHubClientOptions = {}): GitHubAppClient {
  const maxWaitMs = options.maxWaitMs ?? 60_000;
  const requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
  const attempts = options.attempts ?? 3;
  const maxRateLimitWaits = 5;
  const auth = createAppAuth({ appId: config.appId, privateKey: config.privateKey });
  const request = octokitRequest.defaults({
    baseUrl: config.apiUrl,
    headers: { 'user-agent': options.userAgent ?? 'wharf-redelivery-sweeper', 'x-github-api-version': '2022-11-28' },
    // auth-app signs a JWT for the /app/* routes (the App itself, not an installation).
    request: { hook: auth.hook },
  });

  async function call<T>(
    what: string, signal: AbortSignal | undefined, idempotent: boolean, send: (signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      signal?.throwIfAborted();
      const timeout = AbortSignal.timeout(requestTimeoutMs);
      try {
        return await send(signal ? AbortSignal.any([signal, timeout]) : timeout);
      } catch (error) {
        if (signal?.aborted) throw signal.reason;
        const verdict = judge(error as ErrorLike);
        // A bounded number of rate-limit waits: a limit that keeps coming
        // back ends the sweep, which resumes on the next turn.
        if (verdict.kind === 'wait' && verdict.ms <= maxWaitMs && attempt <= maxRateLimitWaits) {
          options.onWait?.({ ms: verdict.ms, reason: 'rate-limit' });
          await sleep(verdict.ms, signal);
          continue;
        }
        if (verdict.kind === 'retry' && idempotent && attempt < attempts) {
          const ms = verdict.ms ?? jitter(500 * 2 ** (attempt - 1));
          if (ms <= maxWaitMs) {
            options.onWait?.({ ms, reason: 'retry' });
            await sleep(ms, signal);
            continue;
          }
        }
        throw toApiError(what, error as ErrorLike, verdict);
      }
    }
  }

  return {
    async listDeliveries(cursor, signal) {
      return call('list deliveries', signal, true, async (requestSignal) => {
        const response = await request('GET /app/hook/deliveries', {
          per_page: 100,
          ...(cursor !== undefined ? { cursor } : {}),
          request: { signal: requestSignal },
        });
        return {
          deliveries: response.data.map((item) => ({
            id: String(item.id),
            guid: item.guid,
            deliveredAt: new Date(item.delivered_at),
            redelivery: item.redelivery,
            status: item.status,
            statusCode: item.status_code,
            event: item.event,
            action: item.action,
          })),
          nextCursor: nextCursor(response.headers.link),
        };
      });
    },
    async redeliver(deliveryId, signal) {
      if (!/^\d+$/.test(deliveryId)) throw new GitHubApiError('rejected', undefined, `not a delivery id: ${deliveryId}`);
      await call('redeliver', signal, false, (requestSignal) => request('POST /app/hook/deliveries/{delivery_id}/attempts', {
        delivery_id: Number(deliveryId),
        request: { signal: requestSignal },
      }));
    },
  };
}

/** The `cursor` of the rel="next" link of a Link header, as GitHub pages its deliveries. */
export function nextCursor(link: string | undefined): string | undefined {
  if (!link) return undefined;
  for (const part of link.split(',')) {
    const match = /<([^>]+)>\s*;\s*rel="?next"?/.exec(part);
    if (!match?.[1]) continue;
    try {
      return new URL(match[1]).searchParams.get('cursor') ?? undefined;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

type Verdict =
  | { kind: 'wait'; ms: number }
  | { kind: 'retry'; ms: number | undefined }
  | { kind: 'fail'; failure: GitHubFailure };

function header(error: ErrorLike, name: string): string | undefined {
  const value = error.response?.headers?.[name];
  return value === undefined ? undefined : String(value);
}

/** How long Retry-After asks to wait (seconds or an HTTP date), if it says. */
function retryAfterMs(error: ErrorLike): number | undefined {
  const value = header(error, 'retry-after');
  if (value === undefined) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.ceil(seconds * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

function judge(error: ErrorLike): Verdict {
  const status = typeof error.status === 'number' ? error.status : undefined;
  if (status === undefined || !error.response) {
    // No HTTP answer (Octokit reports it as a 500 without a response):
    // refused, reset, timed out.
    return { kind: 'retry', ms: undefined };
  }
  const retryAfter = retryAfterMs(error);
  if (status === 429 || status === 403) {
    if (retryAfter !== undefined) return { kind: 'wait', ms: retryAfter };
    if (header(error, 'x-ratelimit-remaining') === '0') {
      const reset = Number(header(error, 'x-ratelimit-reset'));
      // A second past the reset: GitHub's clock and ours differ a little.
      return { kind: 'wait', ms: Number.isFinite(reset) ? Math.max(0, reset * 1000 - Date.now()) + 1000 : 60_000 };
    }
    if (status === 429 || /rate limit/i.test(String(error.message ?? ''))) return { kind: 'wait', ms: 60_000 };
    return { kind: 'fail', failure: 'unauthorized' };
  }
  if (status >= 500) return { kind: 'retry', ms: retryAfter };
  if (status === 401) return { kind: 'fail', failure: 'unauthorized' };
  return { kind: 'fail', failure: 'rejected' };
}

function toApiError(what: string, error: ErrorLike, verdict: Verdict): GitHubApiError {
  const status = typeof error.status === 'number' ? error.status : undefined;
  const failure: GitHubFailure = verdict.kind === 'fail' ? verdict.failure : verdict.kind === 'wait' ? 'rate-limited' : 'unavailable';
  // Octokit's messages hold GitHub's answer, never the request's headers.
  const detail = typeof error.message === 'string' ? error.message : 'no answer';
  return new GitHubApiError(failure, status, `GitHub ${what}: ${failure}${status ? ` (${status})` : ''}: ${detail}`);
}

function jitter(ms: number): number {
  return ms * (0.5 + Math.random() * 0.5);
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
