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
//
// A failure says what happened in words an operator can act on: GitHub
// refusing the App's JWT names the App and the variables that hold its id
// and key; no answer names the URL and why (refused, DNS, TLS, timeout).
// Messages hold GitHub's answer, never a request header, the JWT or the key.
import { createAppAuth } from '@octokit/auth-app';
import { request as octokitRequest } from '@octokit/request';
import { backoff, sleep } from '../db/backoff.js';
import { appVariable } from '../db/environment.js';
import { RecoveryConfigError, type GitHubAppConfig } from './config.js';

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
 * - `unavailable`: a 5xx, after the retries; try later;
 * - `unreachable`: no answer (refused, DNS, TLS, timeout, reset), after the
 *   retries; try later, or fix the API URL;
 * - `unauthorized`: 401, or 403 that is not a rate limit (a wrong App id or
 *   key, or a missing permission): an operator must fix the configuration;
 * - `rejected`: another 4xx, about this one request (e.g. a delivery too old
 *   to redeliver, or a cursor GitHub no longer knows).
 */
export type GitHubFailure = 'rate-limited' | 'unavailable' | 'unreachable' | 'unauthorized' | 'rejected';

/** Why no answer came: the connection was refused, a name did not resolve, TLS failed, it took too long, it broke. */
export type NoAnswerCause = 'connection-refused' | 'dns' | 'tls' | 'timeout' | 'connection-reset' | 'network';

export class GitHubApiError extends Error {
  override name = 'GitHubApiError';
  /** The URL asked (without its query), when a request was sent. */
  readonly url: string | undefined;
  /** For `unreachable`: why no answer came. */
  readonly noAnswer: NoAnswerCause | undefined;
  constructor(
    readonly failure: GitHubFailure, readonly status: number | undefined, message: string,
    details: { url?: string; noAnswer?: NoAnswerCause } = {},
  ) {
    super(message);
    this.url = details.url;
    this.noAnswer = details.noAnswer;
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
  response?: { headers?: Record<string, string | number | undefined>; data?: unknown };
  /** Octokit's RequestError: the request it sent (its URL; its headers are redacted and never read here). */
  request?: { url?: unknown };
  cause?: unknown;
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
        if (!(error as ErrorLike).request && (error as ErrorLike).status === undefined) {
          // It failed before any request left: the auth hook could not sign
          // the App's JWT with its key. Not GitHub's failure, and no retry helps.
          throw new RecoveryConfigError(
            `GitHub App ${config.app}: ${appVariable('GITHUB_APP_<APP>_PRIVATE_KEY', config.app)} cannot sign the App's JWT`, config.app,
            appVariable('GITHUB_APP_<APP>_PRIVATE_KEY', config.app));
        }
        const verdict = judge(error as ErrorLike);
        // A bounded number of rate-limit waits: a limit that keeps coming
        // back ends the sweep, which resumes on the next turn.
        if (verdict.kind === 'wait' && verdict.ms <= maxWaitMs && attempt <= maxRateLimitWaits) {
          options.onWait?.({ ms: verdict.ms, reason: 'rate-limit' });
          await sleep(verdict.ms, signal);
          continue;
        }
        if (verdict.kind === 'retry' && idempotent && attempt < attempts) {
          const ms = verdict.ms ?? backoff(attempt - 1, 500, Infinity);
          if (ms <= maxWaitMs) {
            options.onWait?.({ ms, reason: 'retry' });
            await sleep(ms, signal);
            continue;
          }
        }
        throw toApiError(config, what, error as ErrorLike, verdict, { tries: attempt, timeoutMs: requestTimeoutMs });
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

function toApiError(
  config: GitHubAppConfig, what: string, error: ErrorLike, verdict: Verdict, attempt: { tries: number; timeoutMs: number },
): GitHubApiError {
  const status = typeof error.status === 'number' ? error.status : undefined;
  const url = requestUrl(error);
  const [keyVariable, idVariable] = [appVariable('GITHUB_APP_<APP>_PRIVATE_KEY', config.app), appVariable('GITHUB_APP_<APP>_ID', config.app)];
  if (!error.response) {
    const why = whyNoAnswer(error, attempt.timeoutMs);
    return new GitHubApiError('unreachable', undefined,
      `could not reach GitHub at ${url ?? config.apiUrl}: ${why.text}${attempt.tries > 1 ? `, after ${attempt.tries} tries` : ''}`,
      { ...(url ? { url } : {}), noAnswer: why.cause });
  }
  const failure: GitHubFailure = verdict.kind === 'fail' ? verdict.failure : verdict.kind === 'wait' ? 'rate-limited' : 'unavailable';
  // GitHub's own message (Octokit's adds its documentation URL); never the request's headers.
  const said = (error.response.data as { message?: unknown } | undefined)?.message;
  const detail = typeof said === 'string' ? said : typeof error.message === 'string' ? error.message : 'no message';
  const details = url ? { url } : {};
  if (failure === 'unauthorized' && status === 401) {
    return new GitHubApiError(failure, status,
      `GitHub refused the JWT of GitHub App ${config.app} (401: ${detail}): check ${keyVariable} and ${idVariable}`, details);
  }
  if (failure === 'unauthorized') {
    return new GitHubApiError(failure, status,
      `GitHub refused GitHub App ${config.app}'s request to ${what} (${status}: ${detail}): check ${idVariable} and the App's permissions`,
      details);
  }
  return new GitHubApiError(failure, status, `GitHub ${what}: ${failure}${status ? ` (${status})` : ''}: ${detail}`, details);
}

/** The URL a request went to, without its query (a page cursor, which says nothing to the operator). */
function requestUrl(error: ErrorLike): string | undefined {
  const url = error.request?.url;
  if (typeof url !== 'string' || !URL.canParse(url)) return undefined;
  const parsed = new URL(url);
  parsed.search = '';
  parsed.username = '';
  parsed.password = '';
  return parsed.toString();
}

const dnsCodes = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_NONAME', 'EAI_FAIL', 'EAI_NODATA']);
const resetCodes = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);
const timeoutCodes = new Set(['ETIMEDOUT', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
const tlsCodes = new Set([
  'EPROTO', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'UNABLE_TO_GET_ISSUER_CERT', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'DEPTH_ZERO_SELF_SIGNED_CERT', 'SELF_SIGNED_CERT_IN_CHAIN', 'CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID', 'CERT_REVOKED',
  'CERT_UNTRUSTED', 'CERT_REJECTED', 'HOSTNAME_MISMATCH',
]);

/**
 * Why a request got no answer, from what fetch threw (Node's fetch puts the
 * system's error, with its code, in the cause chain; a timeout is the abort
 * signal's TimeoutError): what to tell the operator, in a few words.
 */
export function whyNoAnswer(error: unknown, timeoutMs: number): { cause: NoAnswerCause; text: string } {
  // The innermost message, for a failure none of the codes below names
  // (fetch's and the system's messages quote no header and no secret).
  let innermost: string | undefined;
  for (let link: unknown = error, depth = 0; link && typeof link === 'object' && depth < 8; depth++) {
    const { code, name, hostname, message } = link as { code?: unknown; name?: unknown; hostname?: unknown; message?: unknown };
    if (typeof message === 'string' && message !== '') innermost = message;
    if (name === 'TimeoutError' || (typeof code === 'string' && timeoutCodes.has(code))) {
      return { cause: 'timeout', text: `no answer within ${timeoutMs / 1000}s` };
    }
    if (typeof code === 'string') {
      if (code === 'ECONNREFUSED') return { cause: 'connection-refused', text: 'connection refused (ECONNREFUSED)' };
      if (dnsCodes.has(code)) {
        return { cause: 'dns', text: `the DNS lookup${typeof hostname === 'string' ? ` of ${hostname}` : ''} failed (${code})` };
      }
      if (tlsCodes.has(code) || /^(ERR_SSL_|ERR_TLS_|CERT_)/.test(code)) {
        return { cause: 'tls', text: `the TLS handshake failed (${code})` };
      }
      if (resetCodes.has(code)) return { cause: 'connection-reset', text: `the connection closed before an answer (${code})` };
      if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return { cause: 'network', text: `no route to the host (${code})` };
    }
    link = (link as { cause?: unknown }).cause;
  }
  return { cause: 'network', text: innermost ? `no answer (${innermost})` : 'no answer' };
}

