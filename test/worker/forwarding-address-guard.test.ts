// A destination's address is checked at send time: a URL whose host is, or
// resolves to, a loopback, private, link-local, unique-local or metadata
// address is refused (a permanent outcome, no request made) unless the
// operator allows it.
import { execFileSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import { createSecureContext } from 'node:tls';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AddressRefusedError, addressPolicy, checkDestinationAddress, parseAllowNetworks, parseAllowPrivate, publicOnly, type Lookup,
} from '../../worker/forwarding/address-guard.js';
import { outcomeOf } from '../../worker/forwarding/delivery-outcome.js';
import { guardedAgent } from '../../worker/forwarding/guarded-agent.js';
import { sendDelivery } from '../../worker/forwarding/send-delivery.js';

const check = (url: string, policy = publicOnly, lookup?: Lookup) => checkDestinationAddress(new URL(url).hostname, policy, lookup);
const resolvesTo = (...addresses: string[]): Lookup => async () =>
  addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));

describe('refused by default', () => {
  it.each([
    ['https://127.0.0.1/hook', 'loopback'],
    ['https://10.1.2.3/hook', 'private'],
    ['https://192.168.1.20/hook', 'private'],
    ['https://172.16.0.1/hook', 'private'],
    ['https://169.254.169.254/latest/meta-data/', 'metadata'],
    ['https://169.254.10.1/', 'linkLocal'],
    ['https://[::1]/hook', 'loopback'],
    ['https://[fe80::1]/hook', 'linkLocal'],
    ['https://[fd12:3456::1]/hook', 'uniqueLocal'],
    ['https://[fd00:ec2::254]/', 'metadata'],
    ['https://[::ffff:127.0.0.1]/hook', 'loopback'],
    ['https://[64:ff9b::a01:203]/hook', 'private'],
    ['https://0.0.0.0/hook', 'unspecified'],
    ['https://100.64.0.1/hook', 'carrierGradeNat'],
    ['https://2130706433/hook', 'loopback'],
  ])('%s (%s)', async (url, range) => {
    await expect(check(url)).rejects.toMatchObject({ name: 'AddressRefused', range });
  });

  it('a name that resolves to loopback: localhost, resolved at send time', async () => {
    await expect(check('https://localhost:8443/hook')).rejects.toBeInstanceOf(AddressRefusedError);
  });

  it('a name any of whose addresses is private', async () => {
    await expect(check('https://mixed.example/', publicOnly, resolvesTo('93.184.215.14', '10.0.0.5'))).rejects.toMatchObject({ range: 'private' });
    await expect(check('https://mixed.example/', publicOnly, resolvesTo('2606:4700::1', '::1'))).rejects.toMatchObject({ range: 'loopback' });
  });

  it('public addresses pass', async () => {
    await expect(check('https://93.184.215.14/')).resolves.toHaveLength(1);
    await expect(check('https://[2606:4700::1111]/')).resolves.toHaveLength(1);
    await expect(check('https://hooks.example/', publicOnly, resolvesTo('93.184.215.14', '2606:4700::1111'))).resolves.toHaveLength(2);
  });
});

describe('allowed by the operator', () => {
  const allowPrivate = addressPolicy({ allowPrivate: 'true' });

  it.each(['https://127.0.0.1/', 'https://10.1.2.3/', 'https://[::1]/', 'https://[fd12::1]/', 'https://169.254.10.1/'])(
    'WHARF_FORWARD_ALLOW_PRIVATE=true allows %s', async (url) => {
      await expect(check(url, allowPrivate)).resolves.toHaveLength(1);
    });

  it('WHARF_FORWARD_ALLOW_PRIVATE=true allows localhost', async () => {
    await expect(check('https://localhost/', allowPrivate)).resolves.not.toHaveLength(0);
  });

  it('metadata addresses stay refused unless a named network holds them', async () => {
    await expect(check('https://169.254.169.254/', allowPrivate)).rejects.toMatchObject({ range: 'metadata' });
    await expect(check('https://[fd00:ec2::254]/', allowPrivate)).rejects.toMatchObject({ range: 'metadata' });
    await expect(check('https://169.254.169.254/', addressPolicy({ allowNetworks: '169.254.169.254' }))).resolves.toHaveLength(1);
  });

  it('WHARF_FORWARD_ALLOW_NETWORKS allows exactly the networks it names', async () => {
    const policy = addressPolicy({ allowNetworks: '10.20.0.0/16, fd12:3456::/32' });
    await expect(check('https://10.20.3.4/', policy)).resolves.toHaveLength(1);
    await expect(check('https://[fd12:3456::9]/', policy)).resolves.toHaveLength(1);
    await expect(check('https://10.21.0.1/', policy)).rejects.toMatchObject({ range: 'private' });
    await expect(check('https://127.0.0.1/', policy)).rejects.toMatchObject({ range: 'loopback' });
  });

  it('reads its settings strictly', () => {
    expect(parseAllowPrivate(undefined)).toBe(false);
    expect(parseAllowPrivate('')).toBe(false);
    expect(parseAllowPrivate('false')).toBe(false);
    expect(parseAllowPrivate('TRUE')).toBe(true);
    expect(() => parseAllowPrivate('maybe')).toThrow(/WHARF_FORWARD_ALLOW_PRIVATE/);
    expect(parseAllowNetworks('')).toEqual([]);
    expect(() => parseAllowNetworks('10.0.0.0/33')).toThrow(/WHARF_FORWARD_ALLOW_NETWORKS/);
    expect(() => parseAllowNetworks('intranet')).toThrow(/WHARF_FORWARD_ALLOW_NETWORKS/);
  });
});

describe('at send time', () => {
  let server: Server;
  let port: number;
  let requests = 0;
  beforeAll(async () => {
    server = createServer((_req, res) => {
      requests += 1;
      res.end('ok');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const request = (url: string) => ({ url, headers: { 'content-type': 'application/json' }, body: '{}', timeoutMs: 5_000 });

  /** Sends through an agent of its own (no connection kept from an earlier test), closed after. */
  const sendWith = async (url: string, policy = publicOnly, lookup?: Lookup) => {
    const agent = guardedAgent(policy, lookup);
    try {
      return await sendDelivery(request(url), { dispatcher: agent });
    } finally {
      await agent.close();
    }
  };

  it('a refused address is a permanent AddressRefused, and no request is made', async () => {
    for (const host of ['127.0.0.1', 'localhost']) {
      const result = await sendWith(`http://${host}:${port}/`);
      expect(result.type).toBe('error');
      if (result.type !== 'error') continue;
      expect(outcomeOf(result)).toMatchObject({ kind: 'permanent', errorClass: 'AddressRefused', status: null });
    }
    expect(requests).toBe(0);
  });

  it('the same address is called when the setting allows it', async () => {
    const result = await sendWith(`http://localhost:${port}/`, addressPolicy({ allowPrivate: true }));
    expect(result.type === 'error' ? undefined : result).toMatchObject({ type: 'response', status: 200 });
    expect(requests).toBe(1);
  });

  it('a name that does not resolve is transient', async () => {
    const notFound = Object.assign(new Error('getaddrinfo ENOTFOUND nowhere.invalid'), { code: 'ENOTFOUND' });
    const result = await sendWith('https://nowhere.invalid/', publicOnly, async () => { throw notFound; });
    expect(result.type === 'error' && outcomeOf(result)).toMatchObject({ kind: 'transient', errorClass: 'DnsNotFound' });
  });

  it('a name with several addresses: every one is checked, and the next is tried when one does not answer', async () => {
    // Nothing listens on 127.0.0.2 (the server is on 127.0.0.1): its connection is refused, and the second address serves.
    const agent = guardedAgent(addressPolicy({ allowNetworks: '127.0.0.0/8' }), resolvesTo('127.0.0.2', '127.0.0.1'));
    const before = requests;
    try {
      const result = await sendDelivery(request(`http://two.addresses.test:${port}/`), { dispatcher: agent });
      expect(result.type === 'error' ? result.error : result).toMatchObject({ type: 'response', status: 200 });
      expect(requests - before).toBe(1);
    } finally {
      await agent.close();
    }
    // One refused address among them refuses the name.
    const refused = await sendWith(`http://two.addresses.test:${port}/`, addressPolicy({ allowNetworks: '127.0.0.1/32' }), resolvesTo('127.0.0.1', '10.0.0.1'));
    expect(refused.type === 'error' && outcomeOf(refused)).toMatchObject({ kind: 'permanent', errorClass: 'AddressRefused' });
  });

  it('a name is resolved once per connection, by the guard, and the connection goes to the address it checked (no rebinding)', async () => {
    // The resolver answers the allowed address once, then the metadata service's: a rebinding resolver.
    const answers: string[] = [];
    const rebinding: Lookup = async () => {
      const address = answers.length === 0 ? '127.0.0.1' : '169.254.169.254';
      answers.push(address);
      return [{ address, family: 4 }];
    };
    const policy = addressPolicy({ allowNetworks: '127.0.0.1/32' });
    const agent = guardedAgent(policy, rebinding);
    const before = requests;
    try {
      // `.test` names resolve nowhere else: the request can reach the server only at the address the guard returned.
      const first = await sendDelivery(request(`http://app.rebind.test:${port}/`), { dispatcher: agent });
      expect(first.type === 'error' ? first.error : first).toMatchObject({ type: 'response', status: 200 });
      expect(answers).toEqual(['127.0.0.1']);
      // A new connection asks again, and the new answer is checked before anything is sent.
      server.closeAllConnections();
      const second = await sendDelivery(request(`http://app.rebind.test:${port}/`), { dispatcher: agent });
      expect(second.type === 'error' && outcomeOf(second)).toMatchObject({ kind: 'permanent', errorClass: 'AddressRefused' });
      expect(answers).toEqual(['127.0.0.1', '169.254.169.254']);
      expect(requests - before).toBe(1);
    } finally {
      await agent.close();
    }
  });
});

describe('over TLS', () => {
  it('the connection goes to the checked address and TLS still names the host (SNI, the certificate check)', async () => {
    // A certificate for app.tls.test that no CA signed: the client refuses it, after sending the name in its hello.
    const pem = execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-subj', '/CN=app.tls.test', '-days', '1', '-keyout', '-', '-out', '-'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    // The name the client's hello carries (SNI), as the server reads it.
    const names: string[] = [];
    const server = createTlsServer({
      key: pem, cert: pem,
      SNICallback: (servername, callback) => {
        names.push(servername);
        callback(null, createSecureContext({ key: pem, cert: pem }));
      },
    }, (_req, res) => res.end('ok'));
    server.on('tlsClientError', () => {});
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    const agent = guardedAgent(addressPolicy({ allowNetworks: '127.0.0.1/32' }), async () => [{ address: '127.0.0.1', family: 4 }]);
    try {
      const result = await sendDelivery({ url: `https://app.tls.test:${port}/`, headers: {}, body: '{}', timeoutMs: 5_000 }, { dispatcher: agent });
      expect(result.type === 'error' && outcomeOf(result)).toMatchObject({ kind: 'transient', errorClass: 'TlsError' });
      expect(names).toEqual(['app.tls.test']);
    } finally {
      await agent.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
