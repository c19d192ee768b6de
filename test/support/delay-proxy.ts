// A fake network link for tests and bench/: a loopback TCP proxy that can
// delay every chunk by a fixed time each way, stop listening, hang or cut its
// connections, or cut one once the server has answered a given request. It stands for the distance (and the failures) between a Worker
// and the database's region; it is not a production component.
//
// Delay model: every chunk is delivered `delayMs` after it arrived, in order,
// in both directions. A new connection also pays TCP's handshake: nothing the
// client sends is delivered before one round trip (2 × delayMs) has passed
// since the connection was accepted, as a SYN / SYN-ACK would cost. TLS is not
// modelled.
import { createServer, connect, type Server, type Socket } from 'node:net';

/** pass: forward; hang: swallow every byte both ways, on open connections too (a link that black-holes). */
export type ProxyMode = 'pass' | 'hang';

export interface DelayProxy {
  readonly host: string;
  readonly port: number;
  /** host:port */
  readonly address: string;
  /** One-way delay, for connections accepted from now on. */
  delayMs: number;
  mode: ProxyMode;
  /** Connections accepted since the proxy started (or since the count was reset). */
  accepted: number;
  /**
   * Drops every open connection (a link that fails mid-request): the client
   * side is closed with a FIN, not a reset, because wrangler's local
   * Hyperdrive proxy has no handler for a reset and would throw.
   */
  cut(): void;
  /**
   * Arms a one-shot trap: the next request whose bytes contain `marker` (a
   * statement's text or its prepared name) reaches the server, and the
   * connection is cut once the server has answered it and is idle again
   * (ReadyForQuery 'I': its transaction committed or rolled back), the answer
   * never forwarded. What a client sees when the link fails after COMMIT.
   * Resolves when it has cut.
   */
  cutAfterReplyTo(marker: string): Promise<void>;
  /**
   * Sends the connections accepted from now on to `target` (the open ones
   * stay where they are): a proxy that follows a primary that moved, as
   * HAProxy with a primary check does.
   */
  retarget(target: { host: string; port: number }): void;
  /** Stops listening and cuts every connection: the port refuses. */
  stop(): Promise<void>;
  /** Listens again on the same port. */
  start(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Delivers chunks to `write` in arrival order, each no earlier than its due
 * time; `finish` queues the end behind them, so a FIN never overtakes data.
 */
function delayedWriter(write: (chunk: Buffer) => void, end: () => void) {
  const queue: { due: number; chunk: Buffer | 'end' }[] = [];
  let timer: ReturnType<typeof setTimeout> | undefined;
  let finished = false;
  const flush = () => {
    timer = undefined;
    const now = performance.now();
    while (queue.length > 0 && queue[0]!.due <= now) {
      const { chunk } = queue.shift()!;
      if (chunk === 'end') return end();
      write(chunk);
    }
    if (queue.length > 0) timer = setTimeout(flush, queue[0]!.due - now);
  };
  const push = (chunk: Buffer | 'end', due: number) => {
    queue.push({ due: Math.max(due, queue.at(-1)?.due ?? 0), chunk });
    if (timer === undefined) timer = setTimeout(flush, Math.max(0, queue[0]!.due - performance.now()));
  };
  return {
    push(chunk: Buffer, due: number) {
      if (!finished) push(chunk, due);
    },
    finish(due: number) {
      if (finished) return;
      finished = true;
      push('end', due);
    },
    stop() {
      clearTimeout(timer);
      queue.length = 0;
      finished = true;
    },
  };
}

export async function startDelayProxy(options: {
  target: { host: string; port: number };
  delayMs?: number;
  port?: number;
}): Promise<DelayProxy> {
  let server: Server | undefined;
  let port = options.port ?? 0;
  let target = options.target;

  const links = new Set<() => void>();
  let trap: { marker: Buffer; sprung: () => void } | undefined;
  /** ReadyForQuery, transaction idle: the last message of an answer in autocommit. */
  const readyIdle = Buffer.from([0x5a, 0, 0, 0, 5, 0x49]);

  const handle = (client: Socket) => {
    proxy.accepted += 1;
    const delay = proxy.delayMs;
    const handshakeDone = performance.now() + 2 * delay;
    const upstream = connect(target.port, target.host);
    upstream.setNoDelay(true);
    client.setNoDelay(true);
    let closed = false;
    // Closes the client with a FIN, not a reset: what a client sees when the
    // far end goes away behind a proxy.
    const closeClient = () => {
      client.end();
      setTimeout(() => client.destroy(), 1_000).unref();
    };
    const toUpstream = delayedWriter((chunk) => upstream.write(chunk), () => upstream.end());
    const toClient = delayedWriter((chunk) => client.write(chunk), closeClient);
    /** This link holds the trapped request: its answer is swallowed, then the link cut. */
    let trapped: { answer: Buffer; sprung: () => void } | undefined;
    client.on('data', (chunk: Buffer) => {
      if (proxy.mode === 'hang') return;
      if (trap && chunk.includes(trap.marker)) {
        trapped = { answer: Buffer.alloc(0), sprung: trap.sprung };
        trap = undefined;
      }
      toUpstream.push(chunk, Math.max(performance.now(), handshakeDone) + delay);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (proxy.mode === 'hang') return;
      if (trapped) {
        trapped.answer = Buffer.concat([trapped.answer, chunk]);
        if (trapped.answer.subarray(-readyIdle.length).equals(readyIdle)) {
          drop();
          trapped.sprung();
        }
        return;
      }
      toClient.push(chunk, performance.now() + delay);
    });
    // Failed (refused, reset) or cut: nothing more is forwarded either way.
    const drop = () => {
      if (closed) return;
      closed = true;
      links.delete(drop);
      toUpstream.stop();
      toClient.stop();
      upstream.destroy();
      closeClient();
    };
    links.add(drop);
    // An orderly end travels behind the data sent before it, `delay` later.
    const upstreamEnded = () => {
      links.delete(drop);
      toClient.finish(performance.now() + delay);
    };
    const clientEnded = () => {
      links.delete(drop);
      toUpstream.finish(performance.now() + delay);
    };
    upstream.on('end', upstreamEnded);
    upstream.on('close', (hadError) => (hadError ? drop() : upstreamEnded()));
    upstream.on('error', drop);
    client.on('end', clientEnded);
    client.on('close', (hadError) => (hadError ? drop() : clientEnded()));
    client.on('error', drop);
  };

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const next = createServer(handle);
      next.once('error', reject);
      next.listen(port, '127.0.0.1', () => {
        port = (next.address() as { port: number }).port;
        server = next;
        resolve();
      });
    });

  const cut = () => {
    for (const drop of [...links]) drop();
  };

  const stop = async () => {
    const current = server;
    server = undefined;
    cut();
    if (current) await new Promise<void>((resolve) => current.close(() => resolve()));
  };

  const proxy: DelayProxy = {
    host: '127.0.0.1',
    get port() { return port; },
    get address() { return `127.0.0.1:${port}`; },
    delayMs: options.delayMs ?? 0,
    mode: 'pass',
    accepted: 0,
    cut,
    cutAfterReplyTo: (marker) => new Promise<void>((resolve) => {
      trap = { marker: Buffer.from(marker), sprung: resolve };
    }),
    retarget: (next) => {
      target = next;
    },
    stop,
    start: async () => { if (!server) await listen(); },
    close: stop,
  };
  await listen();
  return proxy;
}
