// Decides what a handler's failure means for its row, from every error in the
// cause chain. The strongest reading wins: a vanished event or a lost lease
// forbids any write; an effect that may have happened must not be retried;
// a payload that cannot be parsed never will be; transport trouble is retried
// without using the budget; anything else spends one unit of it.
import { causeChain, errorClassName } from './causes.js';
import { errorCode, isPgConnectionLost, isUnavailableSqlState, sqlState } from '../db/error-codes.js';
import {
  HandlerTimeoutError,
  LeaseLostError,
  OutcomeUncertainError,
  PayloadParsingError,
  TransientError,
} from './errors.js';

export type FailureKind = 'transient' | 'unknown' | 'permanent' | 'uncertain';

export type Classification =
  /** Call wharf.fail with this kind and class. */
  | { action: 'fail'; kind: FailureKind; errorClass: string }
  /** The event was erased while it ran: count it dropped, write nothing. */
  | { action: 'drop'; reason: 'erased-during-processing'; errorClass: string }
  /** The lease is gone: write nothing, the new holder owns the row. */
  | { action: 'lease-lost'; errorClass: string };

/** Lock contention on a fence or a business write: retry that transaction. */
export const busySqlStates = new Set(['55P03', '40001', '40P01']);

// Connection trouble: a server that cannot serve now (db/error-codes.ts, the
// receiver's reading too: 08, 53, 57P0x, 57014, 58, 25006 from a server that
// became a standby), and Node/undici socket codes.
const transientSystemCodes = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH',
  'ENETUNREACH', 'ENETDOWN', 'ENOTFOUND', 'EAI_AGAIN', 'ESOCKETTIMEDOUT',
]);

const errorClassPattern = /^[A-Za-z_$][A-Za-z0-9_$.:-]{0,127}$/;

export function classifyFailure(error: unknown): Classification {
  const chain = causeChain(error);
  const find = (test: (cause: unknown) => boolean): unknown => chain.find(test);

  const erased = find((cause) => errorCode(cause) === 'WH410');
  if (erased !== undefined) {
    return { action: 'drop', reason: 'erased-during-processing', errorClass: classOf(erased) };
  }
  const lost = find((cause) => errorCode(cause) === 'WH412' || cause instanceof LeaseLostError);
  if (lost !== undefined) return { action: 'lease-lost', errorClass: classOf(lost) };

  const uncertain = find((cause) => cause instanceof OutcomeUncertainError);
  if (uncertain !== undefined) return fail('uncertain', uncertain);
  const permanent = find((cause) => cause instanceof PayloadParsingError || cause instanceof SyntaxError);
  if (permanent !== undefined) return fail('permanent', permanent);
  // A timeout the worker imposed is the handler's own failure, not transport.
  const timedOut = find((cause) => cause instanceof HandlerTimeoutError);
  if (timedOut !== undefined) return fail('unknown', timedOut);
  const transient = find(isTransient);
  if (transient !== undefined) {
    // pg's dropped-connection errors are plain Errors: name what happened.
    if (isPgConnectionLost(transient)) return { action: 'fail', kind: 'transient', errorClass: 'ConnectionLost' };
    return fail('transient', transient);
  }
  // The innermost cause names what actually went wrong, not its wrapper.
  return fail('unknown', chain.at(-1) ?? error);
}

function isTransient(cause: unknown): boolean {
  if (cause instanceof TransientError) return true;
  const state = sqlState(cause);
  if (state !== undefined && (isUnavailableSqlState(state) || busySqlStates.has(state))) return true;
  const code = errorCode(cause);
  if (code !== undefined && (transientSystemCodes.has(code) || code.startsWith('UND_ERR_'))) return true;
  if (typeof cause !== 'object' || cause === null) return false;
  const { status, statusCode, name, message } = cause as Record<string, unknown>;
  const http = typeof status === 'number' ? status : typeof statusCode === 'number' ? statusCode : undefined;
  if (http !== undefined && (http === 429 || (http >= 500 && http <= 599))) return true;
  if (name === 'TimeoutError' || name === 'ConnectTimeoutError') return true;
  return isPgConnectionLost(cause);
}

function fail(kind: FailureKind, cause: unknown): Classification {
  return { action: 'fail', kind, errorClass: classOf(cause) };
}

/**
 * A class name wharf.fail accepts: the error's name, with the SQLSTATE or
 * system code when it has one (`DatabaseError:40001`), never its message.
 */
export function classOf(cause: unknown): string {
  const name = errorClassName(cause);
  const code = errorCode(cause);
  const withCode = code !== undefined && /^[A-Za-z0-9_]{1,40}$/.test(code) ? `${name}:${code}` : name;
  if (errorClassPattern.test(withCode)) return withCode;
  return errorClassPattern.test(name) ? name : 'Error';
}
