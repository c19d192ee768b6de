// The edge fuzz's request generator (test/edge/fuzz.test.ts): what a seeded
// request is (a Plan: method, path, headers, body, and what may come back),
// drawn by a Generator from its own stream of the run's seed, over the
// targets the fuzz seeded (a FuzzWorld). The fuzz sends and judges them.
import { isProvider } from '../../db/providers.js';
import { concatBytes, utf8, type Bytes } from '../../edge/crypto.js';
import { freshId, type Provider, type ProviderScenario } from './edge-fixtures.js';
import { alnum, type Rng } from './random.js';

/** What the generator draws against: the run's seed and limits, and the connections the fuzz seeded. */
export interface FuzzWorld {
  seed: number;
  maxBodyBytes: number;
  targets: Target[];
  /** The GitHub and Slack recipients' connections: ids no connection route of another provider answers to. */
  foreignConnections: number[];
  secretlessConnection: number;
  unreadableConnection: number;
}


// ---------------------------------------------------------------------------
// Randomness: test/support/random.ts's generator, one stream per request
// index (so that request i is the same whatever the answers before it were,
// redeliveries aside): Rng.for(seed, stream, index).

const tokenChars = `${alnum}!#$%&'*+-.^_\`|~`;
/** Characters a path segment holds as they are. */
const segmentChars = `${alnum}-._~!$&'()*+,;=:@`;
const printable = Array.from({ length: 0x7e - 0x21 + 1 }, (_, i) => String.fromCharCode(0x21 + i)).join('');
const latin1 = printable + Array.from({ length: 0xff - 0xa1 + 1 }, (_, i) => String.fromCharCode(0xa1 + i)).join('');

/** A header value fetch accepts: latin-1, no NUL/CR/LF, not blank at the ends. */
function headerValue(rng: Rng, n: number): string {
  if (n === 0) return '';
  const inner = rng.token(Math.max(0, n - 2), `${latin1} \t`);
  return n === 1 ? rng.token(1, latin1) : rng.token(1, latin1) + inner + rng.token(1, latin1);
}

/** A string JSON.stringify writes as storable JSON: no NUL, no lone surrogate. */
function storableString(rng: Rng, n = rng.int(0, 24)): string {
  let out = '';
  for (let i = 0; i < n; i++) {
    out += rng.weighted([
      [6, () => rng.token(1, alnum)],
      [2, () => rng.pick([' ', '"', '\\', '/', '\n', '\t', '\r', '\b', '\f', '\u0001', '\u001f', '\u007f', '\u2028', '\u2029'])],
      [2, () => String.fromCharCode(rng.int(0x80, 0x7ff))],
      [2, () => String.fromCharCode(rng.pick([rng.int(0x800, 0xd7ff), rng.int(0xe000, 0xffff)]))],
      [1, () => String.fromCodePoint(rng.int(0x10000, 0x10ffff))],
    ] as const)();
  }
  return out;
}

/** A JSON value PostgreSQL stores. */
function storableValue(rng: Rng, depth: number): unknown {
  const kind = rng.weighted([
    [3, 'string'], [3, 'number'], [1, 'literal'], [depth > 0 ? 2 : 0, 'array'], [depth > 0 ? 2 : 0, 'object'],
  ] as const);
  switch (kind) {
    case 'string': return storableString(rng);
    case 'number': return rng.pick([0, -0, 1, -1, rng.int(-1e9, 1e9), rng.float() * 10 ** rng.int(-300, 300), Number.MAX_SAFE_INTEGER,
                                    Number.MAX_VALUE, Number.MIN_VALUE, -Number.MAX_VALUE]);
    case 'literal': return rng.pick([true, false, null]);
    case 'array': return Array.from({ length: rng.int(0, 5) }, () => storableValue(rng, depth - 1));
    case 'object': return Object.fromEntries(Array.from({ length: rng.int(0, 5) }, () => [storableString(rng, rng.int(0, 8)), storableValue(rng, depth - 1)]));
  }
}

// ---------------------------------------------------------------------------
// What is sent, and what may come back.


export interface Target {
  name: string;
  provider: Provider;
  s: ProviderScenario;
}

/** What a 202 must have done. */
export type Stores = { fresh: true } | { duplicateOf: number[] };

export interface Plan {
  kind: string;
  note: string;
  target?: string;
  method: string;
  path: string;
  headers: [string, string][];
  body: Uint8Array | null;
  /** Sent as a stream in chunks of these sizes. */
  chunks?: number[];
  /** Sent to the edge whose database is down. */
  down?: boolean;
  /** Allowed statuses; undefined: any (the invariants still hold). */
  statuses?: readonly number[];
  /** The `error` of a refusal. */
  error?: string;
  stores?: Stores;
  /** The delivery key the request carries, when it is known. */
  key?: string;
  extra?: (json: Json) => string | undefined;
  /** For redelivery: the delivery's target, key and body, kept when accepted. */
  origin?: { target: Target; key: string; body: Uint8Array };
}

// any: receipts and errors of every shape.
export type Json = Record<string, any>;

export interface Answer {
  status: number;
  retryAfter: string | null;
  text: string;
  json: Json | undefined;
  failure?: string;
}

export interface Accepted {
  index: number;
  target: Target;
  key: string;
  body: Uint8Array;
  eventIds: number[];
}

// ---------------------------------------------------------------------------
// Generation.

const signatureHeaders: Record<Provider, string[]> = {
  github: ['x-hub-signature-256'],
  gitlab: ['x-gitlab-token'],
  slack: ['x-slack-signature', 'x-slack-request-timestamp'],
  outline: ['outline-signature'],
  forgejo: ['x-forgejo-signature'],
  generic: ['webhook-signature', 'webhook-timestamp', 'webhook-id'],
};
/** Headers an adapter reads or keeps besides its signature's. */
const otherHeaders: Record<Provider, string[]> = {
  github: ['x-github-event', 'x-github-delivery', 'x-github-hook-id', 'x-github-hook-installation-target-id',
           'x-github-hook-installation-target-type', 'user-agent', 'idempotency-key'],
  gitlab: ['x-gitlab-event', 'x-gitlab-event-uuid', 'idempotency-key', 'x-gitlab-webhook-uuid', 'x-gitlab-instance', 'user-agent'],
  slack: ['x-slack-retry-num', 'x-slack-retry-reason', 'user-agent', 'x-github-event'],
  outline: ['user-agent', 'x-github-event', 'idempotency-key'],
  forgejo: ['x-forgejo-event', 'x-forgejo-event-type', 'x-forgejo-delivery', 'x-gitea-event', 'x-gitea-delivery', 'x-gitea-event-type',
            'x-gitea-signature'],
  generic: ['user-agent', 'webhook-id', 'idempotency-key'],
};
const hmacSigned = (provider: Provider) => provider !== 'gitlab';
const timestamped = (provider: Provider) => provider === 'slack' || provider === 'outline' || provider === 'generic';
/** Headers an extra random header must not be (they carry meaning). */
const meaningful = new Set([
  ...Object.values(signatureHeaders).flat(), 'content-type', 'content-length', 'transfer-encoding', 'host',
  'x-github-event', 'x-github-delivery', 'x-gitlab-event', 'x-gitlab-event-uuid', 'idempotency-key', 'x-forgejo-event',
  'x-forgejo-delivery', 'x-gitea-event', 'x-gitea-delivery', 'x-gitea-signature', 'content-encoding',
]);

const fresh: Stores = { fresh: true };
const refusedWith = (status: number, error?: string) => ({ statuses: [status], ...(error ? { error } : {}) });

function wrongSecret(rng: Rng, provider: Provider): string {
  if (provider === 'generic') return `whsec_${Buffer.from(rng.bytes(24)).toString('base64')}`;
  return `wrong-${rng.token(24)}`;
}

export class Generator {
  constructor(readonly world: FuzzWorld, readonly index: number, readonly rng: Rng, readonly accepted: Accepted[]) {}

  get nonce() {
    return `${this.world.seed}-${this.index}`;
  }

  newKey(): string {
    return `fz-${this.world.seed.toString(36)}-${this.index}-${this.rng.token(6)}`;
  }

  target(filter: (t: Target) => boolean = () => true): Target {
    return this.rng.pick(this.world.targets.filter(filter));
  }

  payload(t: Target, key: string): Record<string, unknown> {
    return { ...t.s.payload(key), fuzz_nonce: this.nonce };
  }

  async sign(t: Target, body: Uint8Array, key: string, options: { timestampMs?: number; secret?: string } = {}) {
    return Object.entries(await t.s.sign(body, { deliveryKey: key, ...options }));
  }

  /** A POST of `body`, read whole, with its declared length, or streamed in chunks. */
  post(t: Target | undefined, path: string, body: Uint8Array, headers: [string, string][], fields: Partial<Plan>): Plan {
    const mode = this.rng.weighted([[4, 'bytes'], [4, 'length'], [2, 'stream']] as const);
    const plan: Plan = {
      kind: '?', note: '', method: 'POST', path, body, ...(t ? { target: t.name } : {}),
      headers: [['content-type', 'application/json'], ...headers], ...fields,
    };
    if (mode === 'length' && !plan.headers.some(([name]) => name === 'content-length')) plan.headers.push(['content-length', String(body.length)]);
    if (mode === 'stream') {
      // One chunk size per body (at most 2000 chunks), now and then a last chunk of the rest.
      const size = Math.max(this.rng.pick([1, 7, 100, 4096, 65536]), Math.ceil(body.length / 2000));
      const chunks: number[] = [];
      for (let left = body.length; left > 0;) {
        const n = this.rng.chance(0.02) ? left : Math.min(left, size);
        chunks.push(n);
        left -= n;
      }
      plan.chunks = chunks;
    }
    return plan;
  }

  /** A valid signed delivery of `t`, `payload` as given. */
  async delivery(t: Target, key: string, payload: Record<string, unknown>, fields: Partial<Plan>, text = JSON.stringify(payload)) {
    const body = utf8(text);
    return this.post(t, t.s.path, body, await this.sign(t, body, key), { key, origin: { target: t, key, body }, ...fields });
  }

  async valid(): Promise<Plan> {
    const t = this.target();
    const key = this.newKey();
    return this.delivery(t, key, this.payload(t, key), { kind: 'valid', note: t.name, statuses: [202], stores: fresh });
  }

  /** Valid deliveries in odd clothes: still stored, once. */
  async variant(): Promise<Plan> {
    const rng = this.rng;
    const t = this.target();
    const key = this.newKey();
    const payload = this.payload(t, key);
    const ok = { statuses: [202], stores: fresh } as const;
    const which = rng.pick(['extras', 'content-type', 'headers', 'content-length', 'whitespace', 'escapes', 'provider', 'method-case'] as const);
    switch (which) {
      case 'extras': {
        payload.fuzz = storableValue(rng, rng.int(0, 4));
        return this.delivery(t, key, payload, { kind: 'variant', note: `${t.name} storable extras`, ...ok });
      }
      case 'content-type': {
        const plan = await this.delivery(t, key, payload, { kind: 'variant', note: `${t.name} odd content-type`, ...ok });
        plan.headers[0] = ['content-type', rng.pick([
          '', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=xyz', 'application/json; charset=latin1',
          'application/json; charset=utf-16', '*/*', headerValue(rng, rng.int(1, 300)), 'a'.repeat(rng.int(1000, 20000)),
        ])];
        if (rng.chance(0.2)) plan.headers.splice(0, 1);
        return plan;
      }
      case 'headers': {
        const plan = await this.delivery(t, key, payload, { kind: 'variant', note: `${t.name} random headers`, ...ok });
        for (let n = rng.int(1, 20); n > 0; n--) {
          const name = rng.chance(0.5) ? `x-fuzz-${rng.token(rng.int(1, 12), tokenChars)}`
            : rng.pick(['user-agent', 'accept', 'authorization', 'cookie', 'x-forwarded-for', 'x-github-hook-id', 'x-gitlab-instance',
                        'x-slack-retry-num', 'x-slack-retry-reason', 'origin', 'referer', rng.token(rng.int(1, 30), tokenChars)]);
          if (meaningful.has(name.toLowerCase())) continue;
          plan.headers.push([name, headerValue(rng, rng.chance(0.05) ? rng.int(10_000, 100_000) : rng.int(0, 200))]);
        }
        return plan;
      }
      case 'content-length': {
        const plan = await this.delivery(t, key, payload, { kind: 'variant', note: `${t.name} content-length` });
        const declared = rng.pick(['0', '1', '-1', 'abc', '', '1e3', '0x10', ' 12', '999999', String(this.world.maxBodyBytes), String(this.world.maxBodyBytes + 1),
                                   '1e9', 'Infinity', '99999999999999999999', String(plan.body!.length)]);
        plan.headers = plan.headers.filter(([name]) => name !== 'content-length');
        plan.headers.push(['content-length', declared]);
        delete plan.chunks;
        plan.note += ` ${JSON.stringify(declared)}`;
        // A declared length over the limit is refused unread; any other is only a hint.
        Object.assign(plan, Number(declared) > this.world.maxBodyBytes ? refusedWith(413, 'body-too-large') : ok);
        return plan;
      }
      case 'whitespace': {
        const ws = () => rng.token(rng.int(1, 20), ' \t\r\n');
        return this.delivery(t, key, payload, { kind: 'variant', note: `${t.name} whitespace`, ...ok }, `${ws()}${JSON.stringify(payload, null, rng.int(0, 4))}${ws()}`);
      }
      case 'escapes': {
        // Storable escapes: an escaped backslash before u0000, a surrogate pair, plain escapes.
        const text = JSON.stringify(payload).replace(/}$/, ',"fuzz_escapes":"\\\\u0000 \\ud83d\\ude00 \\u00e9 \\uffff \\u2028 \\/ \\"","\\u00e9\\ud83d\\ude00":1}');
        return this.delivery(t, key, payload, { kind: 'variant', note: `${t.name} storable escapes`, ...ok }, text);
      }
      case 'method-case': {
        const plan = await this.delivery(t, key, payload, { kind: 'variant', note: `${t.name} method post`, ...ok });
        plan.method = 'post';
        return plan;
      }
      case 'provider': {
        switch (t.provider) {
          case 'github': {
            if (rng.chance(0.5)) {
              const plan = await this.delivery(t, key, payload, { kind: 'variant', note: 'github app name in capitals', ...ok });
              plan.path = rng.pick(['/hooks/github/TEST', '/hooks/github/Test']);
              return plan;
            }
            const control = { action: rng.pick(['created', 'deleted', 'suspend']), installation: { id: freshId(), account: { login: 'acme' } }, fuzz_nonce: this.nonce };
            const plan = await this.delivery(t, key, control, { kind: 'variant', note: 'github installation event', ...ok });
            plan.headers = plan.headers.map(([n, v]) => [n, n === 'x-github-event' ? 'installation' : v]);
            return plan;
          }
          case 'slack': {
            if (rng.chance(0.5)) {
              const challenge = storableString(rng, rng.int(1, 40)).trim() || 'c';
              return this.delivery(t, key, { type: 'url_verification', challenge, token: 'x' }, {
                kind: 'variant', note: 'slack url_verification', statuses: [200],
                extra: (json) => (json.challenge === challenge ? undefined : `challenge not echoed: ${JSON.stringify(json)}`),
              });
            }
            return this.delivery(t, key, { type: 'app_rate_limited', team_id: 'T1', minute_rate_limited: 1 }, { kind: 'variant', note: 'slack app_rate_limited', statuses: [200] });
          }
          case 'gitlab': {
            const plan = await this.delivery(t, key, payload, { kind: 'variant', note: 'gitlab delivery key variants', ...ok });
            plan.headers = plan.headers.filter(([n]) => n !== 'x-gitlab-event-uuid');
            if (rng.chance(0.5)) plan.headers.push(['idempotency-key', key]);
            else delete plan.key; // the key is then the body's hash
            return plan;
          }
          case 'forgejo': {
            const plan = await this.delivery(t, key, payload, { kind: 'variant', note: 'forgejo as gitea', ...ok });
            plan.headers = plan.headers.map(([n, v]) => [n.replace('x-forgejo-', 'x-gitea-'), v]);
            return plan;
          }
          default: {
            const plan = await this.delivery(t, key, payload, { kind: 'variant', note: `${t.name} ping-like`, ...ok });
            plan.headers.push(['x-github-event', 'ping']);
            return plan;
          }
        }
      }
    }
  }

  /** An accepted delivery sent again: 202, the same events, as duplicates. */
  async redelivery(): Promise<Plan> {
    const origin = this.accepted.length > 0 ? this.rng.pick(this.accepted) : undefined;
    if (!origin) return this.valid();
    return this.post(origin.target, origin.target.s.path, origin.body, await this.sign(origin.target, origin.body, origin.key), {
      kind: 'redelivery', note: `${origin.target.name} of #${origin.index}`, key: origin.key,
      statuses: [202], stores: { duplicateOf: origin.eventIds },
    });
  }

  /** A captured GitHub or Forgejo body under a new delivery id and event: a duplicate (issue 15, 5). */
  async relabel(): Promise<Plan> {
    const candidates = this.accepted.filter((a) => a.target.provider === 'github' || a.target.provider === 'forgejo');
    if (candidates.length === 0) return this.valid();
    const origin = this.rng.pick(candidates);
    const key = this.newKey();
    const event = this.rng.pick(['installation', 'installation_repositories', 'issues', 'push', 'label', this.rng.token(8)]);
    const headers = (await this.sign(origin.target, origin.body, key))
      .map(([n, v]): [string, string] => [n, /-event$/.test(n) ? event : v]);
    return this.post(origin.target, origin.target.s.path, origin.body, headers, {
      kind: 'relabel', note: `${origin.target.name} #${origin.index} as ${event}`, key,
      statuses: [202], stores: { duplicateOf: origin.eventIds },
    });
  }

  /** A valid delivery whose body changes after signing. */
  async tampered(): Promise<Plan> {
    const rng = this.rng;
    const t = this.target();
    const key = this.newKey();
    const original = utf8(JSON.stringify(this.payload(t, key)));
    const headers = await this.sign(t, original, key);
    let body: Uint8Array;
    const how = rng.pick(['flip', 'truncate', 'extend', 'insert', 'overwrite', 'swap', 'empty'] as const);
    do {
      const at = rng.int(0, original.length - 1);
      switch (how) {
        case 'flip': body = original.slice(); body[at] = original[at]! ^ rng.int(1, 255); break;
        case 'truncate': body = original.slice(0, at); break;
        case 'extend': body = concatBytes(original, rng.chance(0.5) ? rng.bytes(rng.int(1, 64)) : utf8(rng.pick([' ', '\n', '\u0000', '}', ',"x":1}']))); break;
        case 'insert': body = concatBytes(original.slice(0, at), rng.bytes(rng.int(1, 16)), original.slice(at)); break;
        case 'overwrite': body = original.slice(); body.set(rng.bytes(Math.min(8, original.length - at)), at); break;
        case 'swap': { body = original.slice(); const other = rng.int(0, original.length - 1); [body[at], body[other]] = [body[other]!, body[at]!]; break; }
        case 'empty': body = new Uint8Array(0); break;
      }
    } while (Buffer.compare(body, original) === 0);
    // A GitLab token does not sign the body: the changed body is as authentic as any.
    return this.post(t, t.s.path, body, headers, {
      kind: 'tampered', note: `${t.name} ${how}`, key,
      ...(hmacSigned(t.provider) ? refusedWith(401, 'bad-signature') : {}),
    });
  }

  /** A hostile body, properly signed. */
  async hostile(): Promise<Plan> {
    const rng = this.rng;
    const t = this.target();
    const key = this.newKey();
    const payload = this.payload(t, key);
    const json = JSON.stringify(payload);
    const withMember = (member: string | Bytes) =>
      concatBytes(utf8(`${json.slice(0, -1)},`), typeof member === 'string' ? utf8(member) : member, utf8('}'));
    const inString = (raw: Bytes | string) => withMember(concatBytes(utf8('"fuzz_text":"a'), typeof raw === 'string' ? utf8(raw) : raw, utf8('b"')));
    const storable = { statuses: [202], stores: fresh } as const;
    const unstorable = refusedWith(400, 'unstorable-body');
    const maybe = { statuses: [202, 400] } as const;

    let name: string;
    let body: Uint8Array;
    let verdict: Partial<Plan>;
    const which = rng.weighted([
      [3, 'huge-exponent'], [2, 'tiny-exponent'], [3, 'digits'], [2, 'fraction'], [3, 'nesting'], [1, 'long-string'], [1, 'many-keys'],
      [1, 'duplicate-keys'], [2, 'finite'], [3, 'nul'], [3, 'surrogate'], [3, 'invalid-utf8'], [1, 'raw-nul'], [1, 'control'],
      [3, 'not-an-object'], [2, 'not-json'], [1, 'bom'], [2, 'type-confusion'], [2, 'long-subject'],
    ] as const);
    switch (which) {
      case 'huge-exponent': {
        const exponent = rng.pick([String(rng.int(131_072, 1_000_000)), String(rng.int(1_000_000, 2 ** 31)), '99999999999999999999']);
        name = `1e${exponent}`;
        body = withMember(`"fuzz_extra":${rng.pick(['', '-'])}${rng.int(1, 9)}${rng.pick(['e', 'E', 'e+'])}${exponent}`);
        verdict = unstorable;
        break;
      }
      case 'tiny-exponent': {
        const exponent = rng.pick([rng.int(1, 16_383), rng.int(16_384, 2 ** 31)]);
        name = `1e-${exponent}`;
        body = withMember(`"fuzz_extra":1e-${exponent}`);
        verdict = exponent <= 16_383 ? storable : unstorable;
        break;
      }
      case 'digits': {
        // numeric: at most 131072 digits before the decimal point.
        const n = rng.pick([rng.int(310, 131_072), rng.int(131_073, 300_000)]);
        name = `${n} digits`;
        body = withMember(`"fuzz_extra":${rng.pick(['', '-'])}${'9'.repeat(n)}`);
        verdict = n <= 131_072 ? storable : unstorable;
        break;
      }
      case 'fraction': {
        // numeric: at most 16383 digits after it.
        const n = rng.pick([rng.int(1, 16_383), rng.int(16_384, 100_000)]);
        name = `${n} fraction digits`;
        body = withMember(`"fuzz_extra":0.${'1'.repeat(n)}`);
        verdict = n <= 16_383 ? storable : unstorable;
        break;
      }
      case 'nesting': {
        const depth = rng.pick([rng.int(1, 5000), rng.int(5001, 19_999), rng.int(20_000, 400_000)]);
        const objects = rng.chance(0.5);
        name = `nesting ${depth}${objects ? ' objects' : ''}`;
        body = withMember(objects ? `"fuzz_extra":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}` : `"fuzz_extra":${'['.repeat(depth)}${']'.repeat(depth)}`);
        if (body.length > this.world.maxBodyBytes) verdict = refusedWith(413, 'body-too-large');
        else verdict = depth <= 5000 ? storable : depth >= 20_000 ? unstorable : maybe;
        break;
      }
      case 'long-string': {
        const n = rng.int(1000, 900_000);
        name = `string of ${n}`;
        body = withMember(`"fuzz_extra":"${rng.token(n)}"`);
        verdict = storable;
        break;
      }
      case 'many-keys': {
        const n = rng.int(1000, 30_000);
        name = `${n} keys`;
        body = withMember(`"fuzz_extra":{${Array.from({ length: n }, (_, i) => `"k${i}":${i}`).join(',')}}`);
        verdict = storable;
        break;
      }
      case 'duplicate-keys': {
        name = 'duplicate keys';
        body = withMember('"fuzz_extra":1,"fuzz_extra":{"a":1,"a":[2]},"fuzz_nonce":"again"');
        verdict = maybe;
        break;
      }
      case 'finite': {
        const number = rng.pick(['-0', '0e0', '1E+2', '1e308', '1.7976931348623157e309', '5e-324', '123456789012345678901234567890', '-0.0e-0']);
        name = number;
        body = withMember(`"fuzz_extra":${number}`);
        verdict = storable;
        break;
      }
      case 'nul': {
        const where = rng.pick(['value', 'key', 'after-backslash'] as const);
        name = `NUL escape in a ${where}`;
        body = where === 'key' ? withMember(`"a\\u0000b":1`) : inString(where === 'value' ? rng.pick(['\\u0000', '\\u0000\\u0000', 'x\\U0000'.replace('U', 'u')]) : '\\\\\\u0000');
        verdict = refusedWith(400, 'contains-nul');
        break;
      }
      case 'surrogate': {
        const escape = rng.pick(['\\ud800', '\\udc00', '\\uDBFF', '\\uDfFf', '\\udc00\\ud800', '\\ud800\\u0041', '\\ud800\\ud800', '\\ud83d']);
        name = `lone surrogate ${escape}`;
        body = rng.chance(0.8) ? inString(escape) : withMember(`"${escape}":1`);
        verdict = refusedWith(400, 'invalid-json');
        break;
      }
      case 'invalid-utf8': {
        const bytes = rng.pick([[0xff], [0xfe], [0xc3, 0x28], [0xed, 0xa0, 0x80], [0xc0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xe2, 0x82],
                                [0xf8, 0x88, 0x80, 0x80, 0x80], [0x80], [0xef, 0xbf]]);
        name = `bytes ${bytes.map((b) => b.toString(16)).join(' ')}`;
        body = rng.chance(0.8) ? inString(new Uint8Array(bytes)) : concatBytes(new Uint8Array(bytes), utf8(json));
        verdict = refusedWith(400, 'invalid-utf8');
        break;
      }
      case 'raw-nul': {
        name = 'raw NUL';
        body = rng.chance(0.5) ? inString(new Uint8Array([0])) : concatBytes(utf8(json), new Uint8Array([0]));
        verdict = refusedWith(400, 'contains-nul');
        break;
      }
      case 'control': {
        const code = rng.int(1, 0x1f);
        name = `raw control 0x${code.toString(16)} in a string`;
        body = inString(new Uint8Array([code]));
        verdict = refusedWith(400, 'invalid-json');
        break;
      }
      case 'not-an-object': {
        const text = rng.pick(['', '[]', '[1,2]', `[${json}]`, '1', '-1e999999', '1e999999', '"x"', 'null', 'true', 'false', ' ', `"${'9'.repeat(200_000)}"`]);
        name = `top level ${JSON.stringify(text.slice(0, 20))}`;
        body = utf8(text);
        verdict = refusedWith(400, 'invalid-json');
        break;
      }
      case 'not-json': {
        const text = rng.pick(['action=opened&x=1', '{', '}', '{"a":}', '{"a":1,}', "{'a':1}", 'NaN', '{"a":NaN}', '{"a":01}', '{"a":.5}',
                               '{"a":+1}', '{"a":Infinity}', `${json}x`, `${json}${json}`, json.slice(0, -1), '{"a":"\\x41"}', '{"a":"\\u12"}',
                               '/* */{}', '{"a":1}//']);
        name = `not JSON ${JSON.stringify(text.slice(0, 20))}`;
        body = utf8(text);
        verdict = refusedWith(400, 'invalid-json');
        break;
      }
      case 'bom': {
        name = 'byte order mark';
        body = concatBytes(new Uint8Array([0xef, 0xbb, 0xbf]), utf8(json));
        verdict = maybe;
        break;
      }
      case 'type-confusion': {
        // The fields the adapter reads, of another type or absent.
        const raw = rng.pick(['null', '1', '1.5', '-0', '1e999', '1e999999', 'true', '[]', '{}', '""', `"${'k'.repeat(300)}"`, '[[[[1]]]]', 'DROP']);
        const field: Record<Provider, string[]> = {
          github: ['installation', 'repository'], gitlab: ['object_kind', 'project'], slack: ['event_id', 'event', 'team_id', 'type'],
          outline: ['id', 'event', 'payload'], forgejo: ['repository'], generic: ['data', 'type'],
        };
        const victim = rng.pick(field[t.provider]);
        const rest = Object.fromEntries(Object.entries(payload).filter(([k]) => k !== victim));
        name = `${victim}: ${raw.slice(0, 12)}`;
        body = raw === 'DROP' ? utf8(JSON.stringify(rest)) : utf8(`${JSON.stringify(rest).slice(0, -1)},"${victim}":${raw}}`);
        verdict = raw === '1e999999' ? { statuses: [400] } : maybe;
        break;
      }
      case 'long-subject': {
        // A subject (and so a scope key) of any length the provider signs.
        const n = rng.pick([rng.int(100, 2000), rng.int(2000, 10_000), rng.int(10_000, 300_000)]);
        const value = rng.token(n);
        name = `subject of ${n}`;
        const p = structuredClone(payload) as Json;
        if (t.provider === 'generic') p.data = { customer_id: value };
        else if (t.provider === 'slack') p.event.channel = value;
        else if (t.provider === 'outline') { p.payload.id = value; p.payload.model.id = value; }
        else if (t.provider === 'github' || t.provider === 'forgejo') p.repository.full_name = value;
        else p.project.path_with_namespace = value;
        body = utf8(JSON.stringify(p));
        verdict = maybe;
        break;
      }
    }
    return this.post(t, t.s.path, body, await this.sign(t, body, key), { kind: 'hostile', note: `${t.name} ${name}`, key, ...verdict });
  }

  /** Random bytes of a valid body changed, then signed: any answer, but no 500 and nothing stored for a refusal. */
  async resigned(): Promise<Plan> {
    const rng = this.rng;
    const t = this.target();
    const key = this.newKey();
    const body = utf8(JSON.stringify(this.payload(t, key)));
    for (let n = rng.int(1, 6); n > 0; n--) body[rng.int(0, body.length - 1)] = rng.pick([rng.int(0, 255), 0x22, 0x5c, 0x7b, 0x7d, 0x5b, 0x5d, 0x2c, 0x3a, 0x00]);
    return this.post(t, t.s.path, body, await this.sign(t, body, key), { kind: 'resigned', note: `${t.name} random bytes`, key });
  }

  /** A delivery id or event type of `length` characters: over 255 is 400. */
  async longField(): Promise<Plan> {
    const rng = this.rng;
    const t = this.target((x) => x.name !== 'generic-suspended');
    const field = rng.pick(['key', 'type'] as const);
    const length = rng.pick([1, 64, 200, 254, 255, 256, 257, 300, 1000, 6000, 70_000]);
    const fromHeader = field === 'key' ? ['github', 'gitlab', 'forgejo', 'generic'].includes(t.provider) : ['github', 'forgejo'].includes(t.provider);
    const suffix = `-${this.index}`;
    const chars = fromHeader ? (t.provider === 'generic' ? printable : latin1) : undefined;
    const filler = (n: number) => (chars ? rng.token(n, chars) : storableString(rng, n).replace(/[\ud800-\udfff]/g, 'x'));
    // Unique (so a 202 stores), exactly `length` UTF-16 units.
    const make = (prefix = '') => {
      const head = `${prefix}${filler(Math.max(0, length - prefix.length - suffix.length))}`;
      return `${head}${suffix}`.slice(-length);
    };
    let key = this.newKey();
    let plan: Plan;
    if (field === 'key') {
      key = make('k');
      const payload = this.payload(t, key);
      if (t.provider === 'gitlab') {
        const body = utf8(JSON.stringify(payload));
        plan = this.post(t, t.s.path, body, (await this.sign(t, body, key)).map(([n, v]) => [n === 'x-gitlab-event-uuid' && rng.chance(0.5) ? 'idempotency-key' : n, v]), { key });
      } else {
        plan = await this.delivery(t, key, payload, {});
      }
    } else {
      const type = make(t.provider === 'outline' ? 'documents.' : 't');
      const payload: Json = this.payload(t, key);
      if (t.provider === 'gitlab') payload.object_kind = type;
      if (t.provider === 'slack') payload.event.type = type;
      if (t.provider === 'outline') payload.event = type;
      if (t.provider === 'generic') payload.type = type;
      plan = await this.delivery(t, key, payload, {});
      if (t.provider === 'github' || t.provider === 'forgejo') plan.headers = plan.headers.map(([n, v]) => [n, /-event$/.test(n) ? type : v]);
    }
    plan.kind = 'long-field';
    plan.note = `${t.name} ${field} of ${length}`;
    // (Under 8 characters a delivery id cannot be unique to this request.)
    if (length <= 255) Object.assign(plan, { statuses: [202], ...(field === 'type' || length >= 8 ? { stores: fresh } : {}) });
    else if (t.provider === 'generic' && field === 'key') Object.assign(plan, refusedWith(401)); // webhook-id is checked for shape
    else Object.assign(plan, refusedWith(400, 'field-too-long'));
    return plan;
  }

  /** Signature headers missing, empty, garbled, duplicated, wrong, or right but written differently. */
  async signature(): Promise<Plan> {
    const rng = this.rng;
    const t = this.target();
    const key = this.newKey();
    const body = utf8(JSON.stringify(this.payload(t, key)));
    let headers = await this.sign(t, body, key);
    const names = signatureHeaders[t.provider];
    const primary = names[0]!;
    const value = headers.find(([n]) => n === primary)![1];
    const how = rng.pick(['missing', 'empty', 'garbled', 'wrong-secret', 'other-body', 'duplicated', 'respelled', 'truncated', 'unprefixed'] as const);
    let verdict: Partial<Plan> = refusedWith(401, 'bad-signature');
    switch (how) {
      case 'missing': {
        const drop = new Set(rng.chance(0.5) ? names : [rng.pick(names)]);
        headers = headers.filter(([n]) => !drop.has(n));
        verdict = refusedWith(401, 'missing-signature');
        break;
      }
      case 'empty':
        headers = headers.map(([n, v]) => [n, n === primary ? '' : v]);
        verdict = refusedWith(401, 'missing-signature');
        break;
      case 'garbled':
        headers = headers.map(([n, v]) => [n, n === primary ? headerValue(rng, rng.pick([1, 10, 64, 71, 200, 5000, 100_000])) : v]);
        verdict = refusedWith(401);
        break;
      case 'wrong-secret':
        headers = await this.sign(t, body, key, { secret: wrongSecret(rng, t.provider) });
        break;
      case 'other-body':
        if (!hmacSigned(t.provider)) {
          headers = await this.sign(t, body, key, { secret: wrongSecret(rng, t.provider) });
          break;
        }
        headers = await this.sign(t, utf8(JSON.stringify({ ...this.payload(t, key), fuzz_nonce: `other-${this.nonce}` })), key);
        break;
      case 'duplicated':
        // Headers joins repeats with ", ": one header value holding two signatures.
        headers.push([primary, rng.chance(0.5) ? value : headerValue(rng, value.length)]);
        verdict = { statuses: [202, 401] };
        break;
      case 'respelled': {
        // The same signature written another way the scheme allows.
        let respelled: string;
        verdict = { statuses: [202], stores: fresh };
        switch (t.provider) {
          case 'github': case 'forgejo': case 'slack': respelled = value.replace(/[0-9a-f]{64}$/, (hex) => hex.toUpperCase()); break;
          case 'outline': respelled = value.split(',').reverse().map((part) => ` ${part} `).join(',').trim(); break;
          case 'generic': respelled = `v1,${Buffer.from(rng.bytes(32)).toString('base64')} v2,abc ${value} v1a,x`; break;
          default: respelled = value.toUpperCase(); verdict = refusedWith(401, 'bad-signature');
        }
        headers = headers.map(([n, v]) => [n, n === primary ? respelled : v]);
        break;
      }
      case 'truncated':
        headers = headers.map(([n, v]) => [n, n === primary ? v.slice(0, -1) : v]);
        // Base64 without its padding decodes to the same signature.
        verdict = t.provider === 'generic' ? { statuses: [202, 401] } : refusedWith(401);
        break;
      case 'unprefixed':
        headers = headers.map(([n, v]) => [n, n === primary ? v.replace(/^(sha256=|v0=|v1,)/, '') : v]);
        if (t.provider === 'outline' || t.provider === 'forgejo' || t.provider === 'gitlab') verdict = { statuses: [202], stores: fresh }; // nothing to strip
        else verdict = refusedWith(401);
        break;
    }
    return this.post(t, t.s.path, body, headers, { kind: 'signature', note: `${t.name} ${how}`, key, ...verdict });
  }

  /** Timestamps near and far, and malformed. */
  async timestamp(): Promise<Plan> {
    const rng = this.rng;
    const t = this.target((x) => timestamped(x.provider));
    const key = this.newKey();
    const body = utf8(JSON.stringify(this.payload(t, key)));
    const how = rng.pick(['stale', 'future', 'near', 'malformed'] as const);
    const minute = 60_000;
    if (how === 'malformed') {
      const headers = await this.sign(t, body, key);
      const bad = rng.pick(['-5', '1e9', '12345678901234', ' ', 'abc', '0', '1.5', '+1', '99999999999999999999', String(Date.now() * 1000)]);
      const name = t.provider === 'slack' ? 'x-slack-request-timestamp' : t.provider === 'generic' ? 'webhook-timestamp' : 'outline-signature';
      const forged = headers.map(([n, v]): [string, string] => [n, n !== name ? v : t.provider === 'outline' ? v.replace(/^t=\d+/, `t=${bad}`) : bad]);
      return this.post(t, t.s.path, body, forged, { kind: 'timestamp', note: `${t.name} timestamp ${JSON.stringify(bad)}`, key, ...refusedWith(401) });
    }
    const offset = how === 'near' ? rng.int(-4 * minute, 4 * minute)
      : (how === 'stale' ? -1 : 1) * rng.pick([rng.int(5 * minute + 5000, 60 * minute), rng.int(60 * minute, 10 * 365 * 24 * 60 * minute)]);
    const headers = await this.sign(t, body, key, { timestampMs: Date.now() + offset });
    return this.post(t, t.s.path, body, headers, {
      kind: 'timestamp', note: `${t.name} ${how} ${Math.round(offset / 1000)} s`, key,
      ...(how === 'near' ? { statuses: [202], stores: fresh } : refusedWith(401, 'stale-timestamp')),
    });
  }

  /** Signed deliveries posted to routes that are not theirs. */
  async route(): Promise<Plan> {
    const rng = this.rng;
    const t = this.target();
    const key = this.newKey();
    const body = utf8(JSON.stringify(this.payload(t, key)));
    const headers = await this.sign(t, body, key);
    const connectionOf = (x: Target) => x.s.path.split('/').at(-1)!;
    const how = rng.pick(['provider', 'app', 'connection', 'other-provider', 'secretless', 'unreadable'] as const);
    let path: string;
    let verdict: Partial<Plan> = refusedWith(404);
    switch (how) {
      case 'provider':
        // A random name starts with a letter: a bare `.` or `..` is a dot segment, which URL
        // parsing removes (FUZZ_SEED=1096167 drew `.`: /hooks/./9 is /hooks/9, not an unknown provider).
        path = `/hooks/${rng.pick(['bitbucket', 'GitHub', 'githu', 'stripe', 'gitea', 'hooks', `x${rng.token(rng.int(1, 40), segmentChars)}`])}/${connectionOf(t)}`;
        verdict = refusedWith(404, 'unknown-route');
        break;
      case 'app':
        path = `/hooks/${rng.pick(['github', 'slack'])}/${rng.pick(['prod', 'test2', 'te-st', 'test_', 'TEST-', '_test', 'a'.repeat(64), '0', `x${rng.token(rng.int(1, 80), segmentChars)}`])}`;
        verdict = refusedWith(404, 'unknown-app');
        break;
      case 'connection':
        path = `/hooks/${rng.pick(['gitlab', 'outline', 'forgejo', 'generic'])}/${rng.pick(['0', '01', '-1', '1e3', 'abc', '999999999', '9'.repeat(18),
          '9'.repeat(19), '1.0', '%39%39%39%39%39%39', ' 1', `x${rng.token(rng.int(1, 30), segmentChars)}`])}`;
        verdict = refusedWith(404, 'unknown-connection');
        break;
      case 'other-provider': {
        // The id of a connection of another provider (a target's, or a GitHub or Slack recipient's).
        const provider = rng.pick(['gitlab', 'outline', 'forgejo', 'generic'] as const);
        const ids = [...this.world.targets.filter((x) => x.provider !== provider && x.provider !== 'github' && x.provider !== 'slack').map(connectionOf),
                     ...this.world.foreignConnections.map(String)];
        path = `/hooks/${provider}/${rng.pick(ids)}`;
        verdict = refusedWith(404, 'unknown-connection');
        break;
      }
      case 'secretless':
        path = `/hooks/outline/${this.world.secretlessConnection}`;
        verdict = refusedWith(404, 'connection-without-secret');
        break;
      case 'unreadable':
        path = `/hooks/generic/${this.world.unreadableConnection}`;
        verdict = refusedWith(503, 'secret-unreadable');
        break;
    }
    // The free checks come before the route is looked up (issue 40): a
    // delivery signed for one provider lacks the signature headers of any
    // other (no two of them share a header), so a route of another known
    // provider refuses it 401 before asking whether its app or connection exists.
    const routeProvider = path.split('/')[2]!;
    if (isProvider(routeProvider) && routeProvider !== t.provider) verdict = refusedWith(401, 'missing-signature');
    return this.post(t, path, body, headers, { kind: 'route', note: `${t.name} ${how}`, key, ...verdict });
  }

  async method(): Promise<Plan> {
    const rng = this.rng;
    const t = this.target();
    const method = rng.pick(['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD', 'patch', 'FOO', 'PROPFIND', 'put']);
    const withBody = !['GET', 'HEAD'].includes(method);
    const key = this.newKey();
    const body = utf8(JSON.stringify(this.payload(t, key)));
    return {
      kind: 'method', note: `${t.name} ${method}`, target: t.name, method, path: rng.chance(0.8) ? t.s.path : `/hooks/${rng.token(5)}/x`,
      headers: [['content-type', 'application/json'], ...(await this.sign(t, body, key))], body: withBody ? body : null, key,
      statuses: [404, 405],
    };
  }

  /** Random paths, some of which normalise to a real route. */
  async path(): Promise<Plan> {
    const rng = this.rng;
    const t = this.target();
    const key = this.newKey();
    const body = utf8(JSON.stringify(this.payload(t, key)));
    const [, hooks, provider, endpoint] = t.s.path.split('/') as [string, string, string, string];
    const segment = () => rng.pick([
      rng.token(rng.int(0, 12)), '..', '.', '%00', '%zz', '%2F', '%2e%2e', '%C3%A9', '%ff', 'hooks', provider, endpoint, '~', '@', ':', ';x=1',
      encodeURIComponent(storableString(rng, rng.int(1, 8))),
    ]);
    const path = rng.pick([
      () => `/${Array.from({ length: rng.int(0, 6) }, segment).join('/')}`,
      () => `/${hooks}/${provider}/${endpoint}/${segment()}`,
      () => `/${hooks}/${provider}/${segment()}`,
      () => `/${hooks}/${segment()}/${endpoint}`,
      () => `/${hooks}/${provider}/${endpoint}${rng.pick(['/', '?x=1', '?', '#f', '//', '/.', '/..', '/%2e'])}`,
      () => `/${rng.pick(['HOOKS', 'Hooks', 'hooks/', '/hooks', './hooks', 'x/../hooks'])}/${provider}/${endpoint}`,
      () => `/${hooks}/${provider}/${endpoint.replace(/^./, (c) => `%${c.charCodeAt(0).toString(16)}`)}`,
      () => `/${'x/'.repeat(rng.int(1, 2000))}`,
    ])();
    const method = rng.pick(['POST', 'POST', 'POST', 'GET', 'PUT']);
    return {
      kind: 'path', note: `${t.name} ${path.slice(0, 60)}`, target: t.name, method, path,
      headers: [['content-type', 'application/json'], ...(await this.sign(t, body, key))], body: method === 'GET' ? null : body, key,
    };
  }

  /** The provider's other headers (delivery id, event, hook ids) set, repeated or removed, odd values included. */
  async headerValues(): Promise<Plan> {
    const rng = this.rng;
    const t = this.target();
    const key = this.newKey();
    const plan = await this.delivery(t, key, this.payload(t, key), { kind: 'header-values' });
    const touched: string[] = [];
    for (let n = rng.int(1, 3); n > 0; n--) {
      const name = rng.pick(otherHeaders[t.provider]);
      const value = rng.pick(['', ' ', '\t', 'ping', 'installation', 'push', '0', headerValue(rng, rng.int(1, 40)), headerValue(rng, rng.int(200, 300)),
                              headerValue(rng, rng.int(1000, 70_000))]);
      const op = rng.pick(['set', 'add', 'delete'] as const);
      if (op !== 'add') plan.headers = plan.headers.filter(([header]) => header !== name);
      if (op !== 'delete') plan.headers.push([name, value]);
      touched.push(`${op} ${name}${op === 'delete' ? '' : `=${JSON.stringify(value.slice(0, 12))}`}`);
    }
    plan.note = `${t.name} ${touched.join(', ')}`;
    return plan;
  }

  async oversize(): Promise<Plan> {
    const t = this.target();
    const key = this.newKey();
    const payload = { ...this.payload(t, key), padding: 'x'.repeat(this.world.maxBodyBytes + this.rng.int(0, 1000)) };
    return this.delivery(t, key, payload, { kind: 'oversize', note: t.name, ...refusedWith(413, 'body-too-large') });
  }

  /** Any of the above, to the edge whose database is down: never a 202. */
  async down(): Promise<Plan> {
    const plan = await this.rng.pick([() => this.valid(), () => this.signature(), () => this.route(), () => this.hostile(), () => this.variant()])();
    const statuses = [200, 400, 401, 404, 405, 413, 503].filter((s) => !plan.statuses || plan.statuses.includes(s) || s === 503);
    const { stores: _stores, extra: _extra, error: _error, ...rest } = plan;
    return { ...rest, kind: `down/${plan.kind}`, down: true, statuses };
  }

  generate(kind: Kind): Promise<Plan> {
    return this[kind]();
  }
}

export type Kind = 'valid' | 'variant' | 'redelivery' | 'relabel' | 'tampered' | 'hostile' | 'resigned' | 'longField' | 'signature'
  | 'timestamp' | 'route' | 'method' | 'path' | 'oversize' | 'down' | 'headerValues';

export const mixTable: readonly (readonly [number, Kind])[] = [
  [18, 'valid'], [14, 'variant'], [5, 'redelivery'], [3, 'relabel'], [10, 'tampered'], [16, 'hostile'], [4, 'resigned'],
  [5, 'longField'], [9, 'signature'], [5, 'timestamp'], [4, 'route'], [2, 'method'], [3, 'path'], [1, 'oversize'], [2, 'down'], [4, 'headerValues'],
];
