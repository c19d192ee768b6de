// A pino logger whose JSON lines a test can read.
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';

export interface CapturedLogs {
  logger: Logger;
  text(): string;
  lines(): Array<Record<string, unknown>>;
}

export function captureLogs(): CapturedLogs {
  let text = '';
  const destination = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      text += chunk.toString();
      callback();
    },
  });
  return {
    logger: pino({ level: 'debug' }, destination),
    text: () => text,
    lines: () =>
      text
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}
