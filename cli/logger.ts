// The CLI's logs: pretty lines for a person at a terminal, JSON otherwise
// (a pipe, a log collector, a test).
import { pino, type Logger } from 'pino';
import pretty from 'pino-pretty';

export function createCliLogger(name: string): Logger {
  return process.stdout.isTTY
    ? pino({ name }, pretty({ colorize: true, ignore: 'pid,hostname', translateTime: 'HH:MM:ss.l' }))
    : pino({ name });
}
