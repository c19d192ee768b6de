// The application a forwarding benchmark forwards to, in a process of its
// own so that its CPU is not the forwarder's: plain node:http on 127.0.0.1,
// answering every POST 204 at once after reading its body. It records per
// request the time it arrived (performance.timeOrigin + now, a clock every
// process of this machine shares), counts duplicates by `webhook-id` and
// order violations per `wharf-subject` (the sequence number is the end of
// `wharf-delivery-key`), and verifies the Standard Webhooks signature of one
// request in `BENCH_VERIFY_EVERY` (default 50) against BENCH_SIGNING_SECRET
// where the request is signed. The bench reads and resets those figures on
// GET /__stats, GET /__arrivals and POST /__reset, waits on GET
// /__wait?count=N (answered once N requests arrived, so that the bench need
// not poll while it measures), and prints the first line
// `{"url", "pid"}` as the other bench processes do; SIGTERM ends it.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

const secret = process.env.BENCH_SIGNING_SECRET;
const webhook = secret ? new Webhook(secret) : undefined;
const verifyEvery = Math.max(1, Number(process.env.BENCH_VERIFY_EVERY ?? 50));

interface Figures {
  received: number;
  duplicates: number;
  orderViolations: number;
  verified: number;
  badSignatures: number;
  unsigned: number;
}

let figures: Figures;
/** Requests of GET /__wait?count=N, answered once that many arrived. */
let waiters: { count: number; answer: () => void }[] = [];
let seen: Set<string>;
let lastSeq: Map<string, number>;
/** delivery key → arrival, ms on the shared clock. */
let arrivals: Map<string, number>;

function reset(): void {
  waiters = [];
  figures = { received: 0, duplicates: 0, orderViolations: 0, verified: 0, badSignatures: 0, unsigned: 0 };
  seen = new Set();
  lastSeq = new Map();
  arrivals = new Map();
}
reset();

const header = (request: IncomingMessage, name: string): string | undefined => {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
};

function record(request: IncomingMessage, at: number, body: Buffer): void {
  const id = header(request, 'webhook-id') ?? '';
  if (seen.has(id)) {
    figures.duplicates += 1;
    return;
  }
  seen.add(id);
  figures.received += 1;
  if (waiters.length > 0) {
    const due = waiters.filter((waiter) => figures.received >= waiter.count);
    waiters = waiters.filter((waiter) => figures.received < waiter.count);
    for (const waiter of due) waiter.answer();
  }
  const key = header(request, 'wharf-delivery-key') ?? id;
  arrivals.set(key, at);
  const subject = header(request, 'wharf-subject') ?? '';
  const seq = Number(/(\d+)$/.exec(key)?.[1] ?? Number.NaN);
  const last = lastSeq.get(subject);
  if (last !== undefined && seq < last) figures.orderViolations += 1;
  else lastSeq.set(subject, seq);
  if (figures.received % verifyEvery === 1 || verifyEvery === 1) {
    if (header(request, 'webhook-signature') === undefined || !webhook) {
      figures.unsigned += 1;
      return;
    }
    try {
      webhook.verify(body.toString('utf8'), request.headers as Record<string, string>);
      figures.verified += 1;
    } catch {
      figures.badSignatures += 1;
    }
  }
}

function control(request: IncomingMessage, response: ServerResponse): boolean {
  const json = (value: unknown) => {
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(value));
  };
  const wait = /^\/__wait\?count=(\d+)$/.exec(request.url ?? '');
  if (wait) {
    const count = Number(wait[1]);
    if (figures.received >= count) json(figures);
    else waiters.push({ count, answer: () => json(figures) });
  } else if (request.url === '/__stats') json(figures);
  else if (request.url === '/__arrivals') json(Object.fromEntries(arrivals));
  else if (request.url === '/__reset') {
    reset();
    json({ reset: true });
  } else return false;
  return true;
}

const server = createServer((request, response) => {
  const at = performance.timeOrigin + performance.now();
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    if (control(request, response)) return;
    record(request, at, Buffer.concat(chunks));
    response.writeHead(204).end();
  });
});
// Keep-alive connections stay open between the bench's bursts.
server.keepAliveTimeout = 60_000;
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const { port } = server.address() as AddressInfo;
process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}`, pid: process.pid })}\n`);
process.once('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
