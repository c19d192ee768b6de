// Errors a handler throws (or wraps as a cause) to say how its failure should
// be treated. The worker reads their class, never their message.

/** The payload cannot be understood: retrying cannot help, the row ends DEAD. */
export class PayloadParsingError extends Error {
  override name = 'PayloadParsingError';
}

/** A transport failure worth retrying without using the failure budget. */
export class TransientError extends Error {
  override name = 'TransientError';
  /** The HTTP status that made it transient (5xx, 429), when there was one. */
  readonly status: number | undefined;

  constructor(message: string, options: { status?: number; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.status = options.status;
  }
}

/** An external effect may have happened without its record: DEAD, never retried automatically. */
export class OutcomeUncertainError extends Error {
  override name = 'OutcomeUncertainError';
}

/** A handler ran past handler_timeout; the worker abandoned it. */
export class HandlerTimeoutError extends Error {
  override name = 'HandlerTimeout';
}

/** The lease was taken back (renewal refused): the handler must stop writing. */
export class LeaseLostError extends Error {
  override name = 'LeaseLost';
}

/** The worker is stopping: the row will be released and handed out again. */
export class WorkerStoppingError extends Error {
  override name = 'WorkerStopping';
}
