// SIGTERM, SIGINT and SIGHUP (the terminal closed) for long-running verbs:
// the first signal stops gracefully and exits 0 (1 if stopping failed); a
// second one exits at once.
import type { Logger } from 'pino';

const signalNumbers: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGTERM: 15 };

export function stopOnSignals(logger: Logger, stop: () => Promise<void>): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(128 + (signalNumbers[signal] ?? 1));
    }
    stopping = true;
    logger.info({ signal }, 'stopping');
    stop().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ error: error instanceof Error ? error.name : typeof error }, 'stopping failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  process.on('SIGHUP', onSignal);
}
