// A stand-in for Cloudflare Hyperdrive, for bench/ and the Worker database
// tests (a fake, not Hyperdrive): a PostgreSQL wire-protocol server that does
// what makes Hyperdrive cheap for a Worker, and nothing else.
//
// What of the real service it reproduces, and where that is documented
// (Cloudflare's Hyperdrive docs: "How Hyperdrive works", "Connection pooling",
// "Troubleshoot and debug" for its error codes):
// - It answers a client's connection setup itself, at once (no TLS, any user
//   and password), as Hyperdrive's edge does next to the Worker ("How
//   Hyperdrive works": the connection setup happens close to the Worker).
// - It runs each client transaction on an upstream connection from its pool
//   (transaction mode, as Hyperdrive's pool does: "Connection pooling"):
//   taken at the transaction's first message, returned at the ReadyForQuery
//   that ends it idle. With `pooled: false` every transaction opens (and then
//   closes) a connection of its own: an empty pool, the cold case.
// - When it cannot reach the database it answers, as Hyperdrive does, an
//   ErrorResponse with SQLSTATE 58000 ("Server connection attempt failed:
//   connection_refused", the text "Troubleshoot and debug" lists); an
//   upstream lost mid-transaction closes the client.
//
// What it does not reproduce: query caching (Hyperdrive caches some read
// queries; Wharf's calls are writes or volatile functions, which it does not
// cache); TLS to the client or to the database; authentication (upstream
// connections are opened by `pg`, so any authentication works, and then
// spoken to raw); the limits on session features in transaction mode (SET,
// LISTEN, advisory locks outside a transaction are not refused here);
// Hyperdrive's other errors, connection limits and timeouts; the distance
// between regions (tests put delay-proxy.ts between it and PostgreSQL).
// Protocol 3.0 only; no cancel requests, no COPY. Inside workerd the tests
// use wrangler's own local Hyperdrive (localConnectionString) instead.
import { createServer, type Server, type Socket } from 'node:net';
import pg from 'pg';

export interface HyperdriveStandIn {
  port: number;
  /** postgres://… for a localConnectionString (user and password are not checked). */
  connectionString: string;
  /** When false, every transaction gets a new upstream connection, closed after it. */
  pooled: boolean;
  /** Upstream connections opened so far. */
  opened: number;
  /** Closes idle upstream connections (the pool empties). */
  drain(): void;
  close(): Promise<void>;
}

// Message framing: a type byte, then an int32 length that counts itself.
function* frames(buffer: { data: Buffer }): Generator<{ type: string; message: Buffer }> {
  while (buffer.data.length >= 5) {
    const length = buffer.data.readInt32BE(1);
    if (buffer.data.length < 1 + length) return;
    const message = buffer.data.subarray(0, 1 + length);
    buffer.data = buffer.data.subarray(1 + length);
    yield { type: String.fromCharCode(message[0]!), message };
  }
}

function message(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeInt32BE(4 + body.length, 1);
  return Buffer.concat([head, body]);
}

const cstring = (text: string) => Buffer.from(`${text}\0`, 'utf8');
const int32 = (value: number) => {
  const buffer = Buffer.alloc(4);
  buffer.writeInt32BE(value);
  return buffer;
};

function errorResponse(code: string, text: string): Buffer {
  return message('E', Buffer.concat([
    Buffer.from('S'), cstring('ERROR'), Buffer.from('V'), cstring('ERROR'),
    Buffer.from('C'), cstring(code), Buffer.from('M'), cstring(text), Buffer.from([0]),
  ]));
}

const readyIdle = message('Z', Buffer.from('I'));
const sslRequest = 80877103;
const gssRequest = 80877104;

interface Upstream {
  socket: Socket;
  /** Bytes received and not yet framed. */
  buffer: { data: Buffer };
  onMessage?: (type: string, message: Buffer) => void;
  onLost?: () => void;
}

export async function startHyperdriveStandIn(options: { upstream: string; pooled?: boolean }): Promise<HyperdriveStandIn> {
  const idle: Upstream[] = [];
  const clients = new Set<Socket>();
  const parameters = new Map<string, string>([['server_version', '15'], ['client_encoding', 'UTF8'],
    ['standard_conforming_strings', 'on'], ['DateStyle', 'ISO, MDY'], ['integer_datetimes', 'on'], ['TimeZone', 'UTC']]);

  async function openUpstream(): Promise<Upstream> {
    const client = new pg.Client({ connectionString: options.upstream });
    client.on('error', () => {});
    client.connection.on('parameterStatus', (status: { parameterName: string; parameterValue: string }) => {
      parameters.set(status.parameterName, status.parameterValue);
    });
    await client.connect();
    stand.opened += 1;
    // From here on the socket is ours: pg's parser and handlers let go of it.
    const socket = client.connection.stream as Socket;
    for (const event of ['data', 'end', 'close', 'error']) socket.removeAllListeners(event);
    const upstream: Upstream = { socket, buffer: { data: Buffer.alloc(0) } };
    socket.on('data', (chunk: Buffer) => {
      upstream.buffer.data = Buffer.concat([upstream.buffer.data, chunk]);
      for (const { type, message: framed } of frames(upstream.buffer)) upstream.onMessage?.(type, framed);
    });
    const lost = () => {
      const index = idle.indexOf(upstream);
      if (index >= 0) idle.splice(index, 1);
      socket.destroy();
      upstream.onLost?.();
    };
    socket.on('close', lost);
    socket.on('error', lost);
    return upstream;
  }

  const acquire = (): Promise<Upstream> => (stand.pooled && idle.length > 0 ? Promise.resolve(idle.pop()!) : openUpstream());

  function release(upstream: Upstream): void {
    upstream.onMessage = undefined;
    upstream.onLost = undefined;
    if (stand.pooled) idle.push(upstream);
    else upstream.socket.end(message('X', Buffer.alloc(0)));
  }

  function serve(client: Socket): void {
    clients.add(client);
    client.setNoDelay(true);
    const inbound = { data: Buffer.alloc(0) };
    let started = false;
    let upstream: Upstream | undefined;
    let acquiring: Promise<Upstream | undefined> | undefined;
    /** Syncs and simple queries sent upstream whose ReadyForQuery has not come back. */
    let awaited = 0;
    // Messages of the current transaction, kept in order while its upstream is being taken.
    let pending: Buffer[] = [];

    const closeClient = () => {
      clients.delete(client);
      client.destroy();
    };

    const startup = () => {
      while (!started && inbound.data.length >= 8) {
        const length = inbound.data.readInt32BE(0);
        if (inbound.data.length < length) return;
        const code = inbound.data.readInt32BE(4);
        inbound.data = inbound.data.subarray(length);
        if (code === sslRequest || code === gssRequest) {
          client.write('N');
          continue;
        }
        if (code !== 196608) return closeClient(); // cancel requests and other protocols
        started = true;
        const setup = [message('R', int32(0))];
        for (const [name, value] of parameters) setup.push(message('S', Buffer.concat([cstring(name), cstring(value)])));
        setup.push(message('K', Buffer.concat([int32(process.pid), int32(0)])), readyIdle);
        client.write(Buffer.concat(setup));
      }
    };

    const toUpstream = (framed: Buffer) => {
      if (upstream) upstream.socket.write(framed);
      else pending.push(framed);
    };

    const take = () => {
      acquiring ??= acquire().then(
        (taken) => {
          upstream = taken;
          taken.onMessage = (type, framed) => {
            client.write(framed);
            if (type !== 'Z') return;
            awaited -= 1;
            // Back to the pool once the transaction ended and nothing else is awaited.
            if (awaited === 0 && framed[5] === 0x49 /* 'I' */) {
              upstream = undefined;
              acquiring = undefined;
              release(taken);
            }
          };
          // Lost mid-transaction: the client's transaction is gone too.
          taken.onLost = closeClient;
          for (const framed of pending.splice(0)) taken.socket.write(framed);
          return taken;
        },
        () => {
          // The database cannot be reached: say so as Hyperdrive does, once per
          // awaited answer, and leave the client connected.
          const answers = awaited;
          awaited = 0;
          pending = [];
          acquiring = undefined;
          for (let i = 0; i < answers; i += 1) {
            client.write(Buffer.concat([errorResponse('58000', 'Server connection attempt failed: connection_refused'), readyIdle]));
          }
          return undefined;
        },
      );
    };

    client.on('data', (chunk: Buffer) => {
      inbound.data = Buffer.concat([inbound.data, chunk]);
      if (!started) startup();
      if (!started) return;
      for (const { type, message: framed } of frames(inbound)) {
        if (type === 'X') return closeClient();
        if (type === 'S' || type === 'Q') awaited += 1;
        if (!upstream) take();
        toUpstream(framed);
      }
    });
    const gone = () => {
      clients.delete(client);
      // A client gone mid-transaction leaves its upstream in an unknown state: close it.
      if (upstream) {
        upstream.onLost = undefined;
        upstream.socket.destroy();
      }
    };
    client.on('close', gone);
    client.on('error', gone);
  }

  const server: Server = createServer(serve);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as { port: number }).port;
  const stand: HyperdriveStandIn = {
    port,
    connectionString: `postgres://hyperdrive:stand-in@127.0.0.1:${port}/${new URL(options.upstream).pathname.slice(1)}`,
    pooled: options.pooled ?? true,
    opened: 0,
    drain() {
      for (const upstream of idle.splice(0)) upstream.socket.end(message('X', Buffer.alloc(0)));
    },
    async close() {
      stand.drain();
      for (const client of clients) client.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return stand;
}
