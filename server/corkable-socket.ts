// A cork for sockets that have none, so that `pg` sends a statement's
// messages in one write inside workerd as it does in Node.
import { Buffer } from 'node:buffer';

/** The part of a socket that pg writes a statement through. */
interface WritableSocket {
  write(data: Uint8Array | string, ...rest: unknown[]): boolean;
  cork?: () => void;
  uncork?: () => void;
}

/**
 * pg corks its socket while it writes a statement's messages (Parse, Bind,
 * Describe, Execute, Sync) so that they leave in one segment, but the
 * socket it uses inside workerd (pg-cloudflare's) has no cork: each message
 * leaves alone, and behind a hop that batches small writes (Nagle's
 * algorithm, as wrangler's local Hyperdrive proxy has) the second one waits
 * for a delayed ACK, about 40 ms. Giving that socket a cork makes the
 * statement one write again. Sockets that can cork already are left alone.
 */
export function corkable(socket: WritableSocket): void {
  if (typeof socket.cork === 'function') return;
  const write = socket.write.bind(socket);
  let held: Uint8Array[] | undefined;
  socket.cork = () => {
    held ??= [];
  };
  socket.uncork = () => {
    const chunks = held;
    held = undefined;
    if (chunks && chunks.length > 0) write(Buffer.concat(chunks));
  };
  socket.write = (data, ...rest) => {
    if (!held || typeof data === 'string' || rest.length > 0) return write(data, ...rest);
    held.push(data);
    return true;
  };
}
