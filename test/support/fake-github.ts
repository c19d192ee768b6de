// A FAKE of GitHub, for tests only: not GitHub, and not a complete model of
// it. It plays the two sides of a GitHub App that the redelivery sweeper
// meets.
//
// What of the real service it reproduces, and where GitHub documents it:
// - Webhook deliveries sent to a target, signed as GitHub signs them
//   (X-Hub-Signature-256: HMAC-SHA256 of the body with the webhook secret;
//   "Validating webhook deliveries"), with X-GitHub-Event and an
//   X-GitHub-Delivery GUID that a redelivery keeps ("Webhook events and
//   payloads", delivery headers); each attempt's outcome is recorded.
// - The two REST endpoints of the App's deliveries API ("REST API endpoints
//   for GitHub App webhooks": "List deliveries for an app webhook", "Redeliver
//   a delivery for an app webhook"):
//
//   GET  /app/hook/deliveries?per_page=&cursor=       newest first, cursor paging via Link rel="next"
//   POST /app/hook/deliveries/{delivery_id}/attempts  202, then redelivers: a new attempt (new id,
//                                                     same GUID, redelivery: true) sent to the target
//
// - Both check the App's JWT as GitHub does ("Generating a JSON Web Token
//   (JWT) for a GitHub App"): RS256, signed with the App's private key
//   (verified here with the public key of the pair the test generated),
//   `iss` the App id, not expired, at most ten minutes long.
//
// What it does not reproduce: the rest of the API (installation tokens, other
// endpoints answer 404); GitHub's own timing (deliveries are sent when the
// test says, not within seconds of an event, and no delivery is retried by
// itself: GitHub does not retry failed deliveries either, redelivery is
// asked for); its rate limits and secondary rate limits, except as a test
// scripts them (hold, delay or fail a request, with the status and headers
// the test chooses); the deliveries list's other fields and filters (only
// those the sweeper reads); retention (GitHub keeps deliveries for a limited
// time; here they stay). A test can also redeliver by hand as a person does,
// so that one GUID's attempts sit on different pages in either order.
import { createHmac, randomUUID, verify, type KeyObject } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeDelivery {
  id: number;
  guid: string;
  deliveredAt: Date;
  redelivery: boolean;
  status: string;
  statusCode: number;
  event: string;
  action: string | null;
  /** What was (or will be) posted: the same body and headers on every attempt. */
  body: string;
  headers: Record<string, string>;
}

export interface ApiRequest {
  method: string;
  path: string;
  cursor: string | null;
  userAgent: string;
  /** The status the fake answered. */
  status: number;
}

export interface CannedResponse {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
}

export interface FakeGitHubOptions {
  appId: string;
  /** The public key of the App's key pair (PEM or KeyObject). */
  publicKey: string | KeyObject;
  /** The App's webhook secret: deliveries are signed with it (X-Hub-Signature-256). */
  webhookSecret: string;
  /** Posts one delivery attempt to the webhook URL; resolves with the HTTP status (0: no answer). */
  deliver: (attempt: { headers: Record<string, string>; body: string }) => Promise<number>;
  /** The largest page served (GitHub's is 100); smaller pages make paging visible with few deliveries. */
  maxPerPage?: number;
}

export interface FakeGitHub {
  url: string;
  /** Every attempt, oldest first. */
  readonly deliveries: FakeDelivery[];
  /** Every API request, in arrival order. */
  readonly requests: ApiRequest[];
  /** The delivery id of every redelivery asked for and accepted, in order. */
  readonly redeliveryAsks: number[];
  /**
   * Sends a new delivery (a GUID of its own) to the webhook URL and records
   * the attempt. `recordAs` records a status whatever the target answered
   * (e.g. a timeout: GitHub gave up while the edge still stored it); `hold`
   * records it as failed with status 0 ("timed out") and posts nothing until
   * the returned `release` is called: an original that arrives late.
   */
  send(event: { event: string; action?: string; payload: Record<string, unknown>; guid?: string },
    options?: { recordAs?: number; hold?: boolean }): Promise<{ delivery: FakeDelivery; release: () => Promise<number> }>;
  /**
   * Redelivers `guid` as a person does from the App's settings page ("Redeliver"):
   * a new attempt (a new id, the same GUID, body and headers, redelivery: true)
   * sent to the webhook URL now and recorded with the target's answer, or
   * `recordAs`. Attempts are listed newest first, so this one is listed before
   * every earlier attempt of its GUID, pages before them when others came between.
   */
  redeliverByHand(guid: string, options?: { recordAs?: number }): Promise<FakeDelivery>;
  /** Answers the next requests matching `method` with `responses`, one each, instead of serving them. */
  failNext(method: 'GET' | 'POST', ...responses: CannedResponse[]): void;
  /** Runs before each API request is served (after the JWT check); may delay it. */
  onRequest: ((request: Omit<ApiRequest, 'status'>) => Promise<void> | void) | undefined;
  /** Holds every redelivery back (accepted, not yet attempted) until the returned function is called. */
  holdRedeliveries(): () => void;
  /** Runs alongside each redelivery's POST to the webhook URL (a late original racing it). */
  onRedeliver: ((delivery: FakeDelivery) => Promise<unknown>) | undefined;
  /** Waits until every redelivery asked for so far has been attempted. */
  settled(): Promise<void>;
  close(): Promise<void>;
}

/** The JWT check GitHub makes for /app routes; returns an error message, or undefined when valid. */
function checkJwt(authorization: string | undefined, appId: string, publicKey: string | KeyObject): string | undefined {
  const match = /^bearer\s+([\w-]+)\.([\w-]+)\.([\w-]+)$/i.exec(authorization ?? '');
  if (!match) return 'A JSON web token could not be decoded';
  const [, header64, payload64, signature64] = match as unknown as [string, string, string, string];
  let header: { alg?: unknown };
  let payload: { iss?: unknown; iat?: unknown; exp?: unknown };
  try {
    header = JSON.parse(Buffer.from(header64, 'base64url').toString('utf8')) as typeof header;
    payload = JSON.parse(Buffer.from(payload64, 'base64url').toString('utf8')) as typeof payload;
  } catch {
    return 'A JSON web token could not be decoded';
  }
  if (header.alg !== 'RS256') return 'A JSON web token could not be decoded';
  const signed = verify('sha256', Buffer.from(`${header64}.${payload64}`), publicKey, Buffer.from(signature64, 'base64url'));
  if (!signed) return 'A JSON web token could not be decoded';
  if (String(payload.iss) !== appId) return `Integration not found`;
  const now = Math.floor(Date.now() / 1000);
  if (typeof payload.iat !== 'number' || payload.iat > now + 60) return "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued";
  if (typeof payload.exp !== 'number' || payload.exp <= now) return "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires";
  if (payload.exp - payload.iat > 660) return "'Expiration time' claim ('exp') is too far in the future";
  return undefined;
}

function statusText(code: number): string {
  if (code >= 200 && code < 300) return 'OK';
  if (code === 0) return 'timed out';
  return `Invalid HTTP Response: ${code}`;
}

export async function startFakeGitHub(options: FakeGitHubOptions): Promise<FakeGitHub> {
  const deliveries: FakeDelivery[] = [];
  const requests: ApiRequest[] = [];
  const redeliveryAsks: number[] = [];
  const canned: Record<'GET' | 'POST', CannedResponse[]> = { GET: [], POST: [] };
  const pending = new Set<Promise<unknown>>();
  const maxPerPage = options.maxPerPage ?? 100;
  // GitHub's ids only grow; start somewhere large, as GitHub's are.
  let nextId = 90_000_000_000;
  let gate: Promise<void> = Promise.resolve();

  const attempt = async (delivery: Omit<FakeDelivery, 'status' | 'statusCode' | 'deliveredAt'>, recordAs?: number): Promise<FakeDelivery> => {
    const deliveredAt = new Date();
    let code: number;
    try {
      code = await options.deliver({ headers: delivery.headers, body: delivery.body });
    } catch {
      code = 0;
    }
    const recorded = recordAs ?? code;
    const done: FakeDelivery = { ...delivery, deliveredAt, status: statusText(recorded), statusCode: recorded };
    deliveries.push(done);
    return done;
  };

  const fake: FakeGitHub = {
    url: '',
    deliveries,
    requests,
    redeliveryAsks,
    onRequest: undefined,
    onRedeliver: undefined,
    async send(event, sendOptions = {}) {
      const guid = event.guid ?? randomUUID();
      const body = JSON.stringify(event.payload);
      const headers = {
        'content-type': 'application/json',
        'user-agent': 'GitHub-Hookshot/fake',
        'x-github-event': event.event,
        'x-github-delivery': guid,
        'x-github-hook-installation-target-type': 'integration',
        'x-github-hook-installation-target-id': options.appId,
        'x-hub-signature-256': `sha256=${createHmac('sha256', options.webhookSecret).update(body).digest('hex')}`,
      };
      const base = { id: nextId++, guid, redelivery: false, event: event.event, action: event.action ?? null, body, headers };
      if (sendOptions.hold) {
        const delivery: FakeDelivery = { ...base, deliveredAt: new Date(), status: statusText(0), statusCode: 0 };
        deliveries.push(delivery);
        return { delivery, release: () => options.deliver({ headers, body }) };
      }
      const delivery = await attempt(base, sendOptions.recordAs);
      return { delivery, release: () => Promise.resolve(delivery.statusCode) };
    },
    async redeliverByHand(guid, byHandOptions = {}) {
      const original = deliveries.find((delivery) => delivery.guid === guid);
      if (!original) throw new Error(`the fake sent no delivery ${guid}`);
      return attempt({ id: nextId++, guid, redelivery: true, event: original.event, action: original.action,
                       body: original.body, headers: original.headers }, byHandOptions.recordAs);
    },
    holdRedeliveries() {
      let open!: () => void;
      gate = new Promise<void>((resolve) => (open = resolve));
      return open;
    },
    failNext(method, ...responses) {
      canned[method].push(...responses);
    },
    async settled() {
      while (pending.size > 0) await Promise.all([...pending]);
    },
    close: async () => {},
  };

  const send = (response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void => {
    response.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
    response.end(JSON.stringify(body));
  };

  const serve = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const url = new URL(request.url ?? '/', fake.url);
    const method = request.method ?? 'GET';
    const entry: ApiRequest = {
      method, path: url.pathname, cursor: url.searchParams.get('cursor'), userAgent: String(request.headers['user-agent'] ?? ''), status: 0,
    };
    requests.push(entry);
    const answer = (status: number, body: unknown, headers?: Record<string, string>): void => {
      entry.status = status;
      send(response, status, body, headers);
    };
    const jwtError = checkJwt(request.headers.authorization, options.appId, options.publicKey);
    if (jwtError) return answer(401, { message: jwtError, documentation_url: 'https://docs.github.com/rest' });
    await fake.onRequest?.({ method: entry.method, path: entry.path, cursor: entry.cursor, userAgent: entry.userAgent });
    const cannedResponse = (method === 'GET' || method === 'POST') ? canned[method].shift() : undefined;
    if (cannedResponse) return answer(cannedResponse.status, cannedResponse.body ?? { message: 'canned' }, cannedResponse.headers);

    if (method === 'GET' && url.pathname === '/app/hook/deliveries') {
      const perPage = Math.min(Math.max(Number(url.searchParams.get('per_page') ?? 30) || 30, 1), maxPerPage);
      const cursor = url.searchParams.get('cursor');
      let before = Infinity;
      if (cursor !== null) {
        const match = /^v1_(\d+)$/.exec(cursor);
        if (!match) return answer(422, { message: 'Invalid cursor', documentation_url: 'https://docs.github.com/rest' });
        before = Number(match[1]);
      }
      const older = deliveries.filter((delivery) => delivery.id < before).sort((a, b) => b.id - a.id);
      const page = older.slice(0, perPage);
      const headers: Record<string, string> = {};
      if (older.length > perPage) {
        const next = new URL('/app/hook/deliveries', fake.url);
        next.searchParams.set('per_page', String(perPage));
        next.searchParams.set('cursor', `v1_${page.at(-1)!.id}`);
        headers.link = `<${next.toString()}>; rel="next"`;
      }
      return answer(200, page.map((delivery) => ({
        id: delivery.id, guid: delivery.guid, delivered_at: delivery.deliveredAt.toISOString().replace(/\.\d{3}Z$/, 'Z'),
        redelivery: delivery.redelivery, duration: 0.05, status: delivery.status, status_code: delivery.statusCode,
        event: delivery.event, action: delivery.action, installation_id: null, repository_id: null, throttled_at: null,
      })), headers);
    }

    const redeliver = /^\/app\/hook\/deliveries\/(\d+)\/attempts$/.exec(url.pathname);
    if (method === 'POST' && redeliver) {
      const original = deliveries.find((delivery) => delivery.id === Number(redeliver[1]));
      if (!original) return answer(404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' });
      redeliveryAsks.push(original.id);
      // Like GitHub: accepted now, attempted right after.
      const redelivery = { id: nextId++, guid: original.guid, redelivery: true, event: original.event, action: original.action,
                           body: original.body, headers: original.headers };
      const held = gate;
      const work = held.then(() => Promise.all([attempt(redelivery), fake.onRedeliver?.(original)]));
      pending.add(work);
      void work.finally(() => pending.delete(work));
      return answer(202, {});
    }
    return answer(404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' });
  };

  const server = createServer((request, response) => {
    // The body of a POST attempts request is empty; read it all the same.
    request.resume();
    request.on('end', () => {
      serve(request, response).catch(() => {
        if (!response.headersSent) send(response, 500, { message: 'fake failed' });
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  fake.close = () => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
  return fake;
}
