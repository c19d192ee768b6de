// A WebSocket-to-TCP proxy: it stands where Neon's proxy stands in production,
// so that @neondatabase/serverless inside workerd reaches a plain PostgreSQL.
// `ws://<host>:<port>/v1?address=<host>:<port>`; only loopback targets.
import { connect, isIP } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';

export interface WsProxy {
  /** host:port, what neonConfig.wsProxy puts before `/v1?address=…`. */
  address: string;
  close(): Promise<void>;
}

const loopback = new Set(['127.0.0.1', '::1', 'localhost']);

/** The allowed target, or undefined: a loopback host and a port, nothing else. */
export function allowedTarget(address: string | null): { host: string; port: number } | undefined {
  const match = address ? /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(address) : null;
  if (!match) return undefined;
  const host = match[1]!.replace(/^\[|\]$/g, '');
  const port = Number(match[2]);
  if (!loopback.has(host) || port < 1 || port > 65535) return undefined;
  return { host: host === 'localhost' || isIP(host) ? host : '127.0.0.1', port };
}

export async function startWsProxy(): Promise<WsProxy> {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  const sockets = new Set<WebSocket>();
  server.on('connection', (ws, request) => {
    const target = allowedTarget(new URL(request.url ?? '/', 'http://proxy').searchParams.get('address'));
    if (!target) {
      ws.close(1008, 'target not allowed');
      return;
    }
    sockets.add(ws);
    const tcp = connect(target.port, target.host);
    const pending: Buffer[] = [];
    tcp.on('connect', () => {
      for (const chunk of pending.splice(0)) tcp.write(chunk);
    });
    ws.on('message', (data: Buffer) => {
      if (tcp.connecting) pending.push(data);
      else tcp.write(data);
    });
    tcp.on('data', (chunk) => ws.send(chunk));
    const end = () => {
      sockets.delete(ws);
      tcp.destroy();
      if (ws.readyState === ws.OPEN || ws.readyState === ws.CONNECTING) ws.close();
    };
    ws.on('close', end);
    ws.on('error', end);
    tcp.on('close', end);
    tcp.on('error', end);
  });
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const { port } = server.address() as { port: number };
  return {
    address: `127.0.0.1:${port}`,
    async close() {
      for (const ws of sockets) ws.terminate();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
