// Who is calling, for counting failed sign-ins per client: an address the
// runtime tells, never one the client writes itself.
//
// - On Cloudflare Workers (where `request.cf` is set): CF-Connecting-IP,
//   which Cloudflare sets and a client cannot.
// - On Node (@hono/node-server): the socket's remote address. Behind reverse
//   proxies, `trustedProxyHops` (WHARF_TRUSTED_PROXY_HOPS) says how many of
//   them stand in front of this server: each appends the address it was
//   called from to X-Forwarded-For, so the client is the entry that many
//   places from its end. With 0 (the default) X-Forwarded-For is never read:
//   any client can write it.
// - Else undefined: the caller cannot be told apart from others.
//
// IPv6 clients are keyed by their /64, which one subscriber usually holds
// whole. Runtime-neutral: no Node or Workers API.
import type { Context } from 'hono';

/** A client's key; undefined when the runtime tells nothing about who is calling. */
export type ClientKey = (c: Context) => string | undefined;

/** More hops than any real chain of proxies: a larger setting is a mistake. */
export const maxTrustedProxyHops = 10;

export interface ClientAddressOptions {
  /** Reverse proxies in front of this server whose X-Forwarded-For entries are trusted. Default 0. */
  trustedProxyHops?: number;
}

/** The client key of the runtime's own address, or of the trusted proxies' X-Forwarded-For. */
export function clientAddress(options: ClientAddressOptions = {}): ClientKey {
  const hops = options.trustedProxyHops ?? 0;
  if (!Number.isSafeInteger(hops) || hops < 0 || hops > maxTrustedProxyHops) {
    throw new Error(`trustedProxyHops must be a whole number from 0 to ${maxTrustedProxyHops}`);
  }
  return (c) => {
    const platform = cloudflareClientAddress(c);
    if (platform) return networkBucket(platform);
    const peer = nodeRemoteAddress(c.env);
    // The hops are counted from the peer: without one there is no chain to trust.
    if (!peer) return undefined;
    const forwarded = hops > 0 ? forwardedClient(c.req.header('x-forwarded-for'), hops) : undefined;
    return networkBucket(forwarded ?? peer);
  };
}

/**
 * WHARF_TRUSTED_PROXY_HOPS as a number of hops; unset or empty is 0. Anything
 * else that is not a whole number from 0 to 10 is a problem to report, and
 * then no forwarded header is trusted.
 */
export function readTrustedProxyHops(value: unknown): { hops: number; problem?: string } {
  if (value === undefined || value === '') return { hops: 0 };
  const hops = typeof value === 'number' ? value : typeof value === 'string' && /^\s*\d+\s*$/.test(value) ? Number(value) : NaN;
  if (Number.isSafeInteger(hops) && hops >= 0 && hops <= maxTrustedProxyHops) return { hops };
  return {
    hops: 0,
    problem: `WHARF_TRUSTED_PROXY_HOPS must be a whole number from 0 to ${maxTrustedProxyHops} (the reverse proxies `
      + 'in front of this server); X-Forwarded-For is not trusted until it is',
  };
}

function nodeRemoteAddress(env: unknown): string | undefined {
  const bindings = field(env, 'server') ?? env;
  const address = field(field(field(bindings, 'incoming'), 'socket'), 'remoteAddress');
  return typeof address === 'string' && address !== '' ? address : undefined;
}

function cloudflareClientAddress(c: Context): string | undefined {
  const cf = field(c.req.raw, 'cf');
  if (typeof cf !== 'object' || cf === null) return undefined;
  return c.req.header('cf-connecting-ip')?.trim() || undefined;
}

/**
 * The address `hops` entries from the end of X-Forwarded-For (the leftmost
 * when the list is shorter), or undefined when there is none or it is not an
 * IP address (then the peer stands for the client).
 */
function forwardedClient(header: string | undefined, hops: number): string | undefined {
  const entries = (header ?? '').split(',').map((entry) => entry.trim()).filter((entry) => entry !== '');
  if (entries.length === 0) return undefined;
  return ipAddress(entries[Math.max(0, entries.length - hops)]!);
}

/** An X-Forwarded-For entry as a bare IP address: some proxies add a port ("192.0.2.1:4711", "[2001:db8::1]:4711"). */
function ipAddress(entry: string): string | undefined {
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(entry);
  const ipv4WithPort = /^(\d{1,3}(?:\.\d{1,3}){3})(?::\d+)?$/.exec(entry);
  const bare = bracketed?.[1] ?? ipv4WithPort?.[1] ?? entry;
  if (isIpv4(bare)) return bare;
  return bare.includes(':') && ipv6Groups(bare.replace(/%.*$/, '').toLowerCase()) ? bare : undefined;
}

function isIpv4(text: string): boolean {
  const parts = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  return parts !== null && parts.slice(1).every((part) => Number(part) <= 255);
}

function field(value: unknown, name: string): unknown {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[name] : undefined;
}

/** An address as a throttle key: IPv4 as it is (IPv4-mapped IPv6 too), IPv6 as its /64. */
export function networkBucket(address: string): string {
  const bare = address.replace(/%.*$/, '').toLowerCase();
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(bare);
  if (mapped) return mapped[1]!;
  if (!bare.includes(':')) return bare;
  const groups = ipv6Groups(bare);
  return groups ? `${groups.slice(0, 4).join(':')}::/64` : bare;
}

/** The eight groups of an IPv6 address, without leading zeros; undefined if it is none. */
function ipv6Groups(address: string): string[] | undefined {
  let text = address;
  const ipv4Tail = /(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (ipv4Tail) {
    const [a, b, c, d] = ipv4Tail.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, ipv4Tail.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const head = halves[0] ? halves[0].split(':') : [];
  const tail = halves.length === 2 && halves[1] ? halves[1].split(':') : [];
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  const groups = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill('0'), ...tail];
  if (!groups.every((group) => /^[0-9a-f]{1,4}$/.test(group))) return undefined;
  return groups.map((group) => group.replace(/^0+(?=.)/, ''));
}
