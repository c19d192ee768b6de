// The dispatcher every forwarded request goes through: an undici Agent, which
// keeps connections alive per origin, whose connections open only to an
// address the guard has checked (address-guard.ts). A name is resolved once,
// when a connection opens, by the connection's own lookup, which checks every
// address before handing them over: a resolver that answers differently a
// moment later (DNS rebinding) cannot steer a request elsewhere. Node then
// tries the checked addresses as it would any (both families, the next when
// one does not answer), and TLS checks the certificate against the name in
// the URL. An address written in the URL is checked before connecting, since
// Node looks nothing up for it.
import type { LookupAddress, LookupOptions } from 'node:dns';
import { Agent, buildConnector } from 'undici';
import { addressLiteral, checkDestinationAddress, systemLookup, type AddressPolicy, type Lookup } from './address-guard.js';

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** net.connect's `lookup`, answering only addresses the policy lets Wharf call. */
function guardedLookup(policy: AddressPolicy, lookup: Lookup = systemLookup) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    checkDestinationAddress(hostname, policy, lookup).then((checked) => {
      const family = options.family === 4 || options.family === 6 ? options.family : undefined;
      const addresses = family === undefined ? checked : checked.filter((address) => address.family === family);
      if (options.all) {
        callback(null, addresses);
        return;
      }
      const [first] = addresses;
      if (first === undefined) {
        callback(Object.assign(new Error(`${hostname} has no IPv${family} address`), { code: 'ENODATA' }), '');
        return;
      }
      callback(null, first.address, first.family);
    }, (error: NodeJS.ErrnoException) => callback(error, ''));
  };
}

export function guardedAgent(policy: AddressPolicy, lookup: Lookup = systemLookup): Agent {
  const open = buildConnector({ lookup: guardedLookup(policy, lookup), autoSelectFamily: true });
  return new Agent({
    connect: (options, callback) => {
      if (addressLiteral(options.hostname) === undefined) {
        open(options, callback);
        return;
      }
      checkDestinationAddress(options.hostname, policy, lookup).then(() => {
        // Inside a promise a throw would go unhandled: it fails this connection instead.
        try {
          open(options, callback);
        } catch (error) {
          callback(error as Error, null);
        }
      }, (error: Error) => callback(error, null));
    },
  });
}
