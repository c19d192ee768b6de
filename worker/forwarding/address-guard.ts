// Where a destination may be called. A destination's URL is written by a
// workspace token, so without a guard it could make Wharf call the services
// on its own network (a database's HTTP port, the cloud's metadata service).
// At send time the host is resolved (dns.lookup, all addresses: the same
// resolver the connection uses) and every address is checked with ipaddr.js's
// ranges: only public unicast passes, unless the operator allows private
// networks (WHARF_FORWARD_ALLOW_PRIVATE) or names networks
// (WHARF_FORWARD_ALLOW_NETWORKS, CIDRs). Metadata addresses pass only when a
// named network holds them, never by the private setting alone.
//
// The check runs when a connection opens, and the connection goes to the
// address checked (guarded-agent.ts): the name is resolved once.
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { promisify } from 'node:util';
import ipaddr from 'ipaddr.js';

type Address = ipaddr.IPv4 | ipaddr.IPv6;

export interface AddressPolicy {
  /** Loopback, private, link-local, unique-local, shared (CGNAT) and unspecified addresses pass. */
  allowPrivate: boolean;
  /** Networks that pass whatever their range, metadata addresses included. */
  allowNetworks: readonly [Address, number][];
}

export const publicOnly: AddressPolicy = { allowPrivate: false, allowNetworks: [] };

/** Refused by the policy: the destination's address is not one Wharf may call. A permanent outcome. */
export class AddressRefusedError extends Error {
  override name = 'AddressRefused';
  constructor(readonly host: string, readonly range: string) {
    super(`${host} resolves to a ${range} address, which forwarding may not call (WHARF_FORWARD_ALLOW_PRIVATE, WHARF_FORWARD_ALLOW_NETWORKS)`);
  }
}

/** The ranges WHARF_FORWARD_ALLOW_PRIVATE opens. */
const privateRanges = new Set(['loopback', 'private', 'linkLocal', 'uniqueLocal', 'carrierGradeNat', 'unspecified']);

/** Cloud metadata services (AWS, GCP, Azure, OpenStack; AWS over IPv6; Alibaba). */
const metadataAddresses = ['169.254.169.254', 'fd00:ec2::254', '100.100.100.200'].map((text) => ipaddr.parse(text).toNormalizedString());

/** WHARF_FORWARD_ALLOW_PRIVATE's value: `true`/`1`/`yes` (any case) allows; unset, empty, `false`/`0`/`no` do not. */
export function parseAllowPrivate(value: string | undefined): boolean {
  const text = (value ?? '').trim().toLowerCase();
  if (text === '' || text === 'false' || text === '0' || text === 'no') return false;
  if (text === 'true' || text === '1' || text === 'yes') return true;
  throw new RangeError(`WHARF_FORWARD_ALLOW_PRIVATE: expected true or false, got ${JSON.stringify(value)}`);
}

/** WHARF_FORWARD_ALLOW_NETWORKS's value: comma-separated CIDRs (`10.20.0.0/16,fd12::/64`) or single addresses. */
export function parseAllowNetworks(value: string | undefined): [Address, number][] {
  const entries = (value ?? '').split(',').map((entry) => entry.trim()).filter(Boolean);
  return entries.map((entry) => {
    try {
      if (entry.includes('/')) return ipaddr.parseCIDR(entry);
      const address = ipaddr.parse(entry);
      return [address, address.kind() === 'ipv4' ? 32 : 128];
    } catch {
      throw new RangeError(`WHARF_FORWARD_ALLOW_NETWORKS: ${JSON.stringify(entry)} is not an address or a CIDR`);
    }
  });
}

export function addressPolicy(settings: { allowPrivate?: string | boolean; allowNetworks?: string }): AddressPolicy {
  const allowPrivate = typeof settings.allowPrivate === 'boolean' ? settings.allowPrivate : parseAllowPrivate(settings.allowPrivate);
  return { allowPrivate, allowNetworks: parseAllowNetworks(settings.allowNetworks) };
}

/**
 * The IPv4 address an IPv6 one carries (IPv4-mapped, NAT64's 64:ff9b::/96,
 * 6to4), which is the one actually reached; the address itself otherwise.
 */
function effective(address: Address): Address {
  if (address.kind() === 'ipv4') return address;
  const v6 = address as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address();
  const bytes = v6.toByteArray();
  switch (v6.range()) {
    case 'rfc6052':
    case 'rfc6145':
      return ipaddr.fromByteArray(bytes.slice(12, 16));
    case '6to4':
      return ipaddr.fromByteArray(bytes.slice(2, 6));
    default:
      return v6;
  }
}

/** Why `text` (one resolved address) may not be called, or undefined when it may. */
export function refusal(text: string, policy: AddressPolicy): string | undefined {
  let address: Address;
  try {
    address = effective(ipaddr.parse(text.replace(/%.*$/, '')));
  } catch {
    return 'unparsable';
  }
  const inNetwork = (candidate: Address) => policy.allowNetworks.some(([network, bits]) =>
    network.kind() === candidate.kind() && candidate.match(network, bits));
  if (inNetwork(address) || inNetwork(ipaddr.parse(text.replace(/%.*$/, '')))) return undefined;
  if (metadataAddresses.includes(address.toNormalizedString())) return 'metadata';
  const range = address.range();
  if (range === 'unicast') return undefined;
  if (policy.allowPrivate && privateRanges.has(range)) return undefined;
  return range;
}

export type Lookup = (host: string) => Promise<LookupAddress[]>;

const lookupAll = promisify(dnsLookup);
export const systemLookup: Lookup = (host) => lookupAll(host, { all: true, verbatim: true });

/** The address a URL's host is written as (`10.0.0.1`, `[::1]`); undefined for a name. */
export function addressLiteral(hostname: string): LookupAddress | undefined {
  // `[::1]` in a URL is `::1` to the resolver.
  const host = hostname.replace(/^\[(.*)\]$/, '$1');
  return ipaddr.isValid(host) ? { address: host, family: ipaddr.parse(host).kind() === 'ipv4' ? 4 : 6 } : undefined;
}

/**
 * Resolves a URL's host (`example.com`, `10.0.0.1`, `[::1]`) and checks every
 * address: the addresses when all may be called; AddressRefusedError naming
 * the first refused one's range otherwise. A name that does not resolve
 * throws the resolver's error (ENOTFOUND, EAI_AGAIN: transient).
 */
export async function checkDestinationAddress(hostname: string, policy: AddressPolicy, lookup: Lookup = systemLookup): Promise<LookupAddress[]> {
  const literal = addressLiteral(hostname);
  const addresses = literal ? [literal] : await lookup(hostname);
  if (addresses.length === 0) throw Object.assign(new Error(`${hostname} has no address`), { code: 'ENODATA' });
  for (const { address } of addresses) {
    const why = refusal(address, policy);
    if (why !== undefined) throw new AddressRefusedError(hostname, why);
  }
  return addresses;
}
