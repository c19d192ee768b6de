// The dispatcher every forwarded request goes through: an undici Agent, which
// keeps connections alive per origin, whose connections open only to an
// address the guard has checked (address-guard.ts). The host is resolved
// once, when a connection opens, and the socket goes to the address that was
// checked: a resolver that answers differently a moment later (DNS
// rebinding) cannot steer a request to another address. TLS still checks the
// certificate against the name in the URL (its servername).
import { Agent, buildConnector } from 'undici';
import { checkDestinationAddress, systemLookup, type AddressPolicy, type Lookup } from './address-guard.js';

export function guardedAgent(policy: AddressPolicy, lookup: Lookup = systemLookup): Agent {
  const open = buildConnector({});
  return new Agent({
    connect: (options, callback) => {
      checkDestinationAddress(options.hostname, policy, lookup).then(
        // Every address passed; the first is the one called (no fallback to the others).
        ([first]) => open({ ...options, hostname: first!.address }, callback),
        (error: Error) => callback(error, null),
      );
    },
  });
}
