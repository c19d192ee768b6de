import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** A TCP port on 127.0.0.1 that nothing listens on right now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Whether a server could listen on `port` of 127.0.0.1 right now. */
export function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * Ports below the kernel's ephemeral range, for a server that is down at
 * times and must get its port back: a port from the ephemeral range (what
 * freePort gives) can meanwhile become an outgoing connection's local port or
 * another program's `listen(0)`, and the server then fails to bind it.
 */
export function stablePortRange(): { low: number; high: number } {
  let ephemeralFloor = 32_768;
  try {
    ephemeralFloor = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || ephemeralFloor;
  } catch {
    // Not Linux: the usual range.
  }
  const low = 15_000;
  return { low, high: Math.max(low + 1_000, Math.min(ephemeralFloor, 32_768)) - 1 };
}

/** A port of stablePortRange that nothing listens on right now; `claim` may refuse one (a reservation). */
export async function freeStablePort(claim: (port: number) => boolean = () => true, release: (port: number) => void = () => {}): Promise<number> {
  const { low, high } = stablePortRange();
  for (let tries = 0; tries < 100; tries += 1) {
    const port = low + Math.floor(Math.random() * (high - low));
    if (!claim(port)) continue;
    if (await canListen(port)) return port;
    release(port);
  }
  throw new Error(`no free port between ${low} and ${high}`);
}
