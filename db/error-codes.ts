// Reading what a failed database call says about itself: the one place that
// looks at an error's `code`, and the SQLSTATEs every part reads the same way.

/** The code an error carries: a SQLSTATE (pg), a system code (ECONNRESET), undici's; undefined without one. */
export function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * The SQLSTATE of an error the server answered, undefined for anything else
 * (a socket's EPIPE is five capitals too, but no SQLSTATE class starts with E).
 */
export function sqlState(error: unknown): string | undefined {
  const code = errorCode(error);
  return code !== undefined && /^[0-9A-Z]{5}$/.test(code) && !code.startsWith('E') ? code : undefined;
}

/**
 * A server that cannot serve this statement now, though it or its successor
 * may a moment later; the statement changed nothing. 08 (connection), 53
 * (resources), 57P01/57P02/57P03 (shutting down, crashed, not accepting
 * connections yet), 57014 (cancelled: a statement_timeout or an operator's
 * pg_cancel_backend, rolled back), 58 (system errors; Hyperdrive reports its
 * own as 58000) and 25006 (a write refused as read-only: this server is a
 * standby now, the primary is elsewhere).
 */
export function isUnavailableSqlState(code: string): boolean {
  return /^(08|53|58)/.test(code) || /^57P0[123]$/.test(code) || code === '57014' || code === readOnlyTransaction;
}

const readOnlyTransaction = '25006';

// pg reports a dropped connection without a code; these texts are its own.
const pgConnectionLost =
  /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error and is not queryable|Client was closed and is not queryable)/;

/** pg's own "the connection is gone" errors, which carry no code. */
export function isPgConnectionLost(error: unknown): boolean {
  const message = typeof error === 'object' && error !== null ? (error as { message?: unknown }).message : undefined;
  return errorCode(error) === undefined && typeof message === 'string' && pgConnectionLost.test(message);
}

/**
 * Whether a connection that raised `error` must never run another statement:
 * its server is a standby now (25006), is shutting down or restarting
 * (57P01/57P02/57P03), or the connection itself broke (class 08, a socket
 * error, pg's connection-lost errors). Its pool drops it; the next statement
 * gets a new connection, to wherever the primary is now.
 */
export function retiresConnection(error: unknown): boolean {
  const state = sqlState(error);
  if (state !== undefined) return state === readOnlyTransaction || /^57P0[123]$/.test(state) || state.startsWith('08');
  const code = errorCode(error);
  if (code !== undefined) return /^E[A-Z]+$/.test(code);
  return isPgConnectionLost(error);
}
