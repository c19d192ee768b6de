// One forwarded request against a real HTTP server on 127.0.0.1 (the address
// guard allows private addresses here): the request a receiver gets (payload
// bytes, headers, a signature the Standard Webhooks library verifies, both
// secrets during a rotation), and the outcome each answer maps to.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { addressPolicy } from '../../worker/forwarding/address-guard.js';
import { buildDeliveryRequest } from '../../worker/forwarding/delivery-request.js';
import { outcomeOf, parseRetryAfter } from '../../worker/forwarding/delivery-outcome.js';
import { guardedAgent } from '../../worker/forwarding/guarded-agent.js';
import { secretTexts, type OpenedSecrets } from '../../worker/forwarding/open-secrets.js';
import { sendDelivery, type SendResult } from '../../worker/forwarding/send-delivery.js';
import type { ClaimedDelivery } from '../../worker/sql/delivery-row.js';

const secret = `whsec_${Buffer.from('a'.repeat(32)).toString('base64')}`;
const previousSecret = `whsec_${Buffer.from('b'.repeat(32)).toString('base64')}`;
const agent = guardedAgent(addressPolicy({ allowPrivate: true }));

interface Received {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
  socket: Socket;
}

let server: Server;
let base: string;
const received: Received[] = [];
const sockets = new Set<Socket>();
let responseClosedEarly = 0;

const routes: Record<string, (req: IncomingMessage, res: ServerResponse, body: string) => void> = {
  '/ok': (_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('thanks'),
  '/created': (_req, res) => res.writeHead(201).end(),
  '/redirect': (_req, res) => res.writeHead(301, { location: `${base}/ok` }).end(),
  '/bad': (_req, res) => res.writeHead(400).end('{"error":"nope"}'),
  '/gone': (_req, res) => res.writeHead(410).end(),
  '/slow-down': (_req, res) => res.writeHead(429, { 'retry-after': '7' }).end(),
  '/slow-down-until': (_req, res) => res.writeHead(429, { 'retry-after': new Date(Date.now() + 120_000).toUTCString() }).end(),
  '/unavailable': (_req, res) => res.writeHead(503).end('maintenance'),
  '/timeout': () => {
    // Never answers.
  },
  '/request-timeout': (_req, res) => res.writeHead(408).end(),
  '/reset': (req) => req.socket.destroy(),
  '/endless': (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.on('close', () => {
      if (!res.writableFinished) responseClosedEarly += 1;
    });
    const chunk = 'x'.repeat(16 * 1024);
    const write = (): void => {
      if (res.destroyed) return;
      if (res.write(chunk)) setImmediate(write);
      else res.once('drain', write);
    };
    write();
  },
  '/echo': (req, res) => res.writeHead(500).end(`you sent ${req.headers.authorization} and ${req.headers['x-api-key']}`),
};

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      received.push({ method: req.method!, url: req.url!, headers: req.headers, body, socket: req.socket });
      (routes[req.url!] ?? ((_q, r) => r.writeHead(404).end()))(req, res, body);
    });
  });
  server.on('connection', (socket) => sockets.add(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await agent.close();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  received.length = 0;
});

function delivery(overrides: Partial<ClaimedDelivery> = {}): ClaimedDelivery {
  return {
    delivery_id: '41',
    epoch: '1',
    attempt: 1,
    event_id: '7',
    destination_id: '3',
    url: `${base}/ok`,
    timeout_ms: 5_000,
    signing_secret: 'sealed',
    previous_signing_secret: null,
    credentials: null,
    extra_headers: null,
    provider: 'github',
    event_type: 'pull_request.opened',
    subject: 'repo:acme/api',
    delivery_key: 'c0ffee',
    event_headers: null,
    payload: '{"id":12345678901234567890123,"nested":{"b":1,"a":2}}',
    received_at: new Date(),
    probe: false,
    send_now: true,
    ...overrides,
  };
}

const opened: OpenedSecrets = { signingSecrets: [secret], credentials: null };

async function send(row: ClaimedDelivery, secrets: OpenedSecrets = opened): Promise<Exclude<SendResult, { type: 'stopped' }>> {
  const result = await sendDelivery(buildDeliveryRequest(row, secrets, new Date()), { dispatcher: agent, secrets: secretTexts(secrets) });
  if (result.type === 'stopped') throw new Error('stopped');
  return result;
}

describe('the request', () => {
  it('posts the stored payload byte for byte, signed so that the Standard Webhooks library verifies it', async () => {
    const row = delivery();
    const result = await send(row);
    expect(outcomeOf(result)).toMatchObject({ kind: 'handled', status: 200, response: 'thanks' });
    expect(received).toHaveLength(1);
    const request = received[0]!;
    expect(request.method).toBe('POST');
    expect(request.body).toBe(row.payload);
    expect(request.headers['content-type']).toBe('application/json');
    expect(request.headers['webhook-id']).toBe('wd_41');
    expect(new Webhook(secret).verify(request.body, request.headers as Record<string, string>, { jsonParse: false })).toBeUndefined();
    expect(request.headers).toMatchObject({
      'wharf-provider': 'github', 'wharf-event-type': 'pull_request.opened', 'wharf-subject': 'repo:acme/api',
      'wharf-delivery-key': 'c0ffee', 'wharf-attempt': '1', 'wharf-event-id': '7',
    });
  });

  it('keeps the webhook-id of a delivery on every attempt, and signs each attempt anew', async () => {
    await send(delivery({ attempt: 1 }));
    await send(delivery({ attempt: 2 }));
    expect(received.map((request) => request.headers['webhook-id'])).toEqual(['wd_41', 'wd_41']);
    expect(received.map((request) => request.headers['wharf-attempt'])).toEqual(['1', '2']);
    for (const request of received) new Webhook(secret).verify(request.body, request.headers as Record<string, string>);
  });

  it('signs with both secrets during a rotation: a receiver holding either verifies', async () => {
    await send(delivery(), { signingSecrets: [secret, previousSecret], credentials: null });
    const request = received[0]!;
    expect(String(request.headers['webhook-signature']).split(' ')).toHaveLength(2);
    for (const key of [secret, previousSecret]) new Webhook(key).verify(request.body, request.headers as Record<string, string>);
    const stranger = `whsec_${Buffer.from('c'.repeat(32)).toString('base64')}`;
    expect(() => new Webhook(stranger).verify(request.body, request.headers as Record<string, string>)).toThrow();
  });

  it('passes the provider\'s kept headers on under their own names, except hop-by-hop, host, content-*, webhook-* and wharf-*', async () => {
    await send(delivery({
      event_headers: {
        'x-github-event': 'pull_request', 'x-github-delivery': 'abc', 'user-agent': 'GitHub-Hookshot/1',
        connection: 'close', 'transfer-encoding': 'chunked', host: 'evil.example', 'content-type': 'text/plain',
        'content-length': '3', 'webhook-id': 'forged', 'wharf-provider': 'forged', upgrade: 'websocket',
      },
      extra_headers: { 'x-team': 'payments', 'webhook-signature': 'forged', 'content-type': 'text/xml' },
    }));
    const headers = received[0]!.headers;
    expect(headers).toMatchObject({ 'x-github-event': 'pull_request', 'x-github-delivery': 'abc', 'user-agent': 'GitHub-Hookshot/1', 'x-team': 'payments' });
    expect(headers['webhook-id']).toBe('wd_41');
    expect(headers['wharf-provider']).toBe('github');
    expect(headers['content-type']).toBe('application/json');
    expect(headers.host).toBe(new URL(base).host);
    expect(headers.upgrade).toBeUndefined();
    new Webhook(secret).verify(received[0]!.body, headers as Record<string, string>);
  });

  it('adds the credentials\' header: bearer, basic, or a named header', async () => {
    await send(delivery(), { signingSecrets: [secret], credentials: { type: 'bearer', token: 'tok_123456789' } });
    await send(delivery(), { signingSecrets: [secret], credentials: { type: 'basic', username: 'wharf', password: 'pa:ss word' } });
    await send(delivery(), { signingSecrets: [secret], credentials: { type: 'header', name: 'X-Api-Key', value: 'key_987654321' } });
    expect(received[0]!.headers.authorization).toBe('Bearer tok_123456789');
    expect(received[1]!.headers.authorization).toBe(`Basic ${Buffer.from('wharf:pa:ss word').toString('base64')}`);
    expect(received[2]!.headers['x-api-key']).toBe('key_987654321');
  });

  it('never records a secret a receiver echoes back', async () => {
    const bearer = await send(delivery({ url: `${base}/echo` }), { signingSecrets: [secret], credentials: { type: 'bearer', token: 'tok_123456789' } });
    const header = await send(delivery({ url: `${base}/echo` }), { signingSecrets: [secret], credentials: { type: 'header', name: 'x-api-key', value: 'key_987654321' } });
    expect(bearer.type === 'response' && bearer.response).toBe('you sent [redacted] and undefined');
    expect(header.type === 'response' && header.response).toBe('you sent undefined and [redacted]');
  });

  it('percent-encodes a subject a header cannot carry as it is', async () => {
    await send(delivery({ subject: 'repo:acme/café\r\nx-injected: 1' }));
    expect(received[0]!.headers['wharf-subject']).toBe('repo:acme/caf%C3%A9%0D%0Ax-injected:%201');
    expect(received[0]!.headers['x-injected']).toBeUndefined();
  });

  it('reuses kept-alive connections for requests to one origin, instead of one connection per request', async () => {
    const before = sockets.size;
    for (let i = 0; i < 8; i += 1) await send(delivery());
    // undici may open a second connection while the first is being handed back; never one per request.
    expect(new Set(received.map((request) => request.socket)).size).toBeLessThanOrEqual(2);
    expect(sockets.size - before).toBeLessThanOrEqual(2);
  });
});

describe('what each answer means', () => {
  it('2xx: handled', async () => {
    expect(outcomeOf(await send(delivery({ url: `${base}/created` })))).toMatchObject({ kind: 'handled', status: 201 });
  });

  it('a redirect is not followed, and is permanent', async () => {
    const outcome = outcomeOf(await send(delivery({ url: `${base}/redirect` })));
    expect(outcome).toMatchObject({ kind: 'permanent', errorClass: 'RedirectNotFollowed', status: 301 });
    expect(received.map((request) => request.url)).toEqual(['/redirect']);
  });

  it('400: permanent, with the answer recorded', async () => {
    expect(outcomeOf(await send(delivery({ url: `${base}/bad` })))).toMatchObject({
      kind: 'permanent', errorClass: 'HTTP:400', status: 400, response: '{"error":"nope"}',
    });
  });

  it('410: gone', async () => {
    expect(outcomeOf(await send(delivery({ url: `${base}/gone` })))).toMatchObject({ kind: 'gone', errorClass: 'HTTP:410', status: 410 });
  });

  it('429 with Retry-After in seconds or as a date: transient, waiting as asked', async () => {
    expect(outcomeOf(await send(delivery({ url: `${base}/slow-down` })))).toMatchObject({
      kind: 'transient', errorClass: 'HTTP:429', status: 429, retryAfterMs: 7_000,
    });
    const dated = outcomeOf(await send(delivery({ url: `${base}/slow-down-until` })));
    expect(dated).toMatchObject({ kind: 'transient', status: 429 });
    // An HTTP date has whole seconds: within a second or two of the two minutes asked.
    expect(dated.kind !== 'handled' && dated.retryAfterMs).toBeGreaterThan(100_000);
    expect(dated.kind !== 'handled' && dated.retryAfterMs).toBeLessThanOrEqual(120_000);
  });

  it('408 and 503: transient', async () => {
    expect(outcomeOf(await send(delivery({ url: `${base}/request-timeout` })))).toMatchObject({ kind: 'transient', errorClass: 'HTTP:408' });
    expect(outcomeOf(await send(delivery({ url: `${base}/unavailable` })))).toMatchObject({
      kind: 'transient', errorClass: 'HTTP:503', status: 503, response: 'maintenance', retryAfterMs: null,
    });
  });

  it('no answer within the destination\'s timeout: transient Timeout', async () => {
    const outcome = outcomeOf(await send(delivery({ url: `${base}/timeout`, timeout_ms: 200 })));
    expect(outcome).toMatchObject({ kind: 'transient', errorClass: 'Timeout', status: null });
  });

  it('a reset connection: transient ConnectionReset', async () => {
    expect(outcomeOf(await send(delivery({ url: `${base}/reset` })))).toMatchObject({ kind: 'transient', errorClass: 'ConnectionReset', status: null });
  });

  it('a refused connection: transient ConnectionRefused', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    expect(outcomeOf(await send(delivery({ url: `http://127.0.0.1:${port}/` })))).toMatchObject({ kind: 'transient', errorClass: 'ConnectionRefused' });
  });

  it('reads at most 1 KB of an answer and cancels the rest', async () => {
    const result = await send(delivery({ url: `${base}/endless` }));
    expect(result.type).toBe('response');
    expect(result.type === 'response' && result.response).toBe('x'.repeat(1024));
    // The endless answer's connection was cut: the server saw its response end unfinished.
    await expect.poll(() => responseClosedEarly, { timeout: 10_000 }).toBe(1);
  });

  it('reads Retry-After as seconds or an HTTP date, and nothing else', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfter('120', now)).toBe(120_000);
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:01:00 GMT', now)).toBe(60_000);
    expect(parseRetryAfter('Wed, 31 Dec 2025 00:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('-5', now)).toBeNull();
    expect(parseRetryAfter('soon', now)).toBeNull();
    expect(parseRetryAfter(null, now)).toBeNull();
  });
});
