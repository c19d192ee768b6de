// The SQLSTATE of a failed statement, for tests that assert which error a
// call raises.

/** The error's SQLSTATE (`code`), or undefined when it has none. */
export function sqlstateOf(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string' ? error.code : undefined;
}

/** The SQLSTATE `promise` rejects with; undefined when it resolves (or rejects with no SQLSTATE). */
export function sqlstate(promise: Promise<unknown>): Promise<string | undefined> {
  return promise.then(() => undefined, sqlstateOf);
}
