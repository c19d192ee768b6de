// A receiver in a process of its own, as it runs in production: the Node
// receiver (server/node.ts), or with the argument `minimal` the minimal
// receiver it is measured against (minimal-receiver.ts). The bench starts it
// with `tsx`, reads its URL and pid from the first stdout line and ends it
// with SIGTERM. Logs are off: the bench measures, it does not debug.
// BENCH_RECEIVER_ERRORS=stderr keeps its error lines (the scenarios explain
// every 500 they see with them); those carry reasons and SQLSTATEs, never a body.
import { startNodeServer } from '../../server/node.js';
import { startMinimalReceiver } from './minimal-receiver.js';

const silent = { debug() {}, info() {}, warn() {}, error() {} };
const logger = process.env.BENCH_RECEIVER_ERRORS === 'stderr'
  ? { ...silent, error: (fields: Record<string, unknown>, msg: string) => process.stderr.write(`${JSON.stringify({ ...fields, msg })}\n`) }
  : silent;
const server = process.argv[2] === 'minimal'
  ? await startMinimalReceiver({ databaseUrl: process.env.DATABASE_URL!, secret: process.env.GITHUB_APP_BENCH_WEBHOOK_SECRET! })
  : await startNodeServer({ databaseUrl: process.env.DATABASE_URL, env: process.env, logger });
// Its pid too: `tsx` runs this file in a child of the process the bench started.
process.stdout.write(`${JSON.stringify({ url: server.url, pid: process.pid })}\n`);
process.once('SIGTERM', () => {
  void server.close().finally(() => process.exit(0));
});
