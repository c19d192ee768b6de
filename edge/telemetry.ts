// What the entry points give the app to report with: a structured logger
// (pino's call shape) and the rejection counter webhook_rejected_total{reason}.
// Log fields never hold a body, a header value that authenticates, or a secret.

export interface EdgeLogger {
  debug(fields: Record<string, unknown>, message: string): void;
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

export interface EdgeMetrics {
  /** One rejected, refused or dropped delivery, by reason. */
  rejected(reason: string): void;
}

/** One JSON line per entry on the console: what workerd's log stream keeps. */
export const consoleJsonLogger: EdgeLogger = {
  debug: (fields, message) => console.debug(JSON.stringify({ level: 'debug', time: Date.now(), ...fields, msg: message })),
  info: (fields, message) => console.log(JSON.stringify({ level: 'info', time: Date.now(), ...fields, msg: message })),
  warn: (fields, message) => console.warn(JSON.stringify({ level: 'warn', time: Date.now(), ...fields, msg: message })),
  error: (fields, message) => console.error(JSON.stringify({ level: 'error', time: Date.now(), ...fields, msg: message })),
};
