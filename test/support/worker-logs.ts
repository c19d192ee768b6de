// A pino logger whose JSON lines a test can read.
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import { jsonLines } from './json-lines.js';

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
    lines: () => jsonLines(text),
  };
}
