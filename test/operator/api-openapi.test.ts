// The API's description: /api/openapi.json is served without a token, is a
// valid OpenAPI 3.1 document, and describes every route the API registers
// (both come from the same route definitions, so this guards the wiring).
// And a client that knows nothing but the document reaches every operation
// it describes where the API is, not at the host's root.
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { providers, providersWithSecretIn } from '../../db/providers.js';
import { operatorApi } from '../../operator/api/app.js';
import { parseKeyRing } from '../../db/secret-box.js';
import { startBulkReplay } from '../../operator/sql/bulk-replay.js';
import { createDestination, createDestinationRule } from '../../operator/sql/destinations.js';
import { createApiToken } from '../../operator/sql/operator.js';
import { adminToken, apiClient, type ApiCall } from '../support/api-client.js';
import { admitEvent, createConnection, createWorkspace, deadEvent, deadInstallationEvent, fixtureSource } from '../support/api-fixtures.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { testSecretKeys } from '../support/edge-fixtures.js';
import { serveOperatorApi } from '../support/operator-client.js';

let db: TestDatabase;
let api: ApiCall;

beforeAll(async () => {
  db = await createTestDatabase();
  api = apiClient({ db: db.pool, adminToken });
});

afterAll(async () => {
  await db?.drop();
});

interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  enum?: unknown[];
  $ref?: string;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
}

interface Operation {
  summary?: string;
  description?: string;
  responses: Record<string, unknown>;
  parameters?: { name: string; in: string; required?: boolean }[];
  requestBody?: { required?: boolean; content: Record<string, { schema: JsonSchema }> };
}

interface OpenApiDocument {
  openapi: string;
  servers?: { url: string }[];
  paths: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, JsonSchema> };
}

describe('GET /api/openapi.json', () => {
  let document: OpenApiDocument;
  beforeAll(async () => {
    const response = await api('GET', '/openapi.json');
    expect(response.status).toBe(200);
    document = response.body as unknown as OpenApiDocument;
  });

  it('is served without a token and validates as OpenAPI 3.1', async () => {
    expect(document.openapi).toBe('3.1.0');
    const result = await new Validator().validate(document as unknown as Parameters<Validator["validate"]>[0]);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('describes every route the API registers, and nothing else', () => {
    // A route mounted with its middleware appears once per handler: one entry per method and path.
    const registered = [...new Set(operatorApi({ db: db.pool, adminToken }).routes
      .filter((route) => route.method !== 'ALL' && route.path !== '/openapi.json')
      .map((route) => `${route.method} ${route.path.replaceAll(/:(\w+)/g, '{$1}')}`))]
      .sort();
    const described = Object.entries(document.paths)
      .flatMap(([path, operations]) => Object.keys(operations).map((method) => `${method.toUpperCase()} ${path}`))
      .sort();
    expect(described).toEqual(registered);
  });

  it('names the path parameters, the error answers and the bearer scheme', () => {
    const replay = document.paths['/workspaces/{ws}/events/{id}/replay']?.post;
    expect(replay?.parameters?.map((parameter) => `${parameter.in}:${parameter.name}`).sort()).toEqual(['path:id', 'path:ws']);
    expect(Object.keys(replay?.responses ?? {}).sort()).toEqual(['202', '400', '401', '403', '404', '409', '429', '503']);
    expect(JSON.stringify(document)).toContain('"scheme":"bearer"');
  });

  it("names, for rotate-secret, every provider whose connection holds its own secret (db/providers.ts)", () => {
    const rotate = document.paths['/connections/{id}/rotate-secret']?.post;
    const text = `${rotate?.summary ?? ''} ${rotate?.description ?? ''}`;
    expect(providersWithSecretIn('token', 'signing_key').filter((name) => !text.includes(providers[name].title)).join(', '),
      `the providers ${JSON.stringify(text)} does not name`).toBe('');
  });

  it('documents the filters the event list validates', () => {
    const list = document.paths['/workspaces/{ws}/events']?.get;
    expect(list?.parameters?.filter((parameter) => parameter.in === 'query').map((parameter) => parameter.name).sort())
      .toEqual(['cursor', 'event_type', 'headers', 'limit', 'payload', 'provider', 'received_after', 'received_before', 'state', 'subject']);
  });
});

describe('a client driven by the document alone', () => {
  const W = 601;
  let served: Awaited<ReturnType<typeof serveOperatorApi>>;
  /** Rows for the path parameters, by the collection the {id} follows. */
  const ids: Record<string, number> = {};
  let headScope = '';

  beforeAll(async () => {
    served = await serveOperatorApi({ db: db.pool, adminToken });
    await createWorkspace(db.pool, W);
    const connection = await createConnection(db.pool, W);
    ids.connections = connection;
    ids.events = await deadEvent(db.pool, connection);
    ids['installation-events'] = await deadInstallationEvent(db.pool);
    ids.replays = (await startBulkReplay(db.pool, String(W), {}, 'test')).id;
    ids.tokens = (await createApiToken(db.pool, String(W), 'doomed')).id;
    // The dead letters above opened an issue each; a fresh event heads a scope for the stuck-scope action.
    const issues = await db.pool.query<{ id: string; ws: string | null }>('SELECT id, workspace_id AS ws FROM wharf.issue');
    ids.issues = Number(issues.rows.find((row) => row.ws !== null)!.id);
    ids['installation-issues'] = Number(issues.rows.find((row) => row.ws === null)!.id);
    ids.head = await admitEvent(db.pool, connection);
    // Webhook rules: an edit's sample names the first destination, webhook, and keeps the URL and secret.
    const alertRule = async (workspace: number | null) => Number((await db.pool.query<{ rule: { id: number } }>(
      workspace === null
        ? `SELECT wharf.create_instance_alert_rule('doomed', 'issue_opened', NULL, NULL, 'webhook', 'https://alerts.example.test/x', 'whsec_AAAA', 'test') AS rule`
        : `SELECT wharf.create_alert_rule($1, 'doomed', 'issue_opened', NULL, NULL, 'webhook', 'https://alerts.example.test/x', 'whsec_AAAA', 'test') AS rule`,
      workspace === null ? [] : [workspace])).rows[0]!.rule.id);
    ids['alert-rules'] = await alertRule(W);
    ids['instance-alert-rules'] = await alertRule(null);
    // Tested after the rules above are deleted (the document lists a path's methods together): rules of their own.
    ids['alert-rule-tests'] = await alertRule(W);
    ids['instance-alert-rule-tests'] = await alertRule(null);
    headScope = (await db.pool.query<{ scope_key: string }>('SELECT scope_key FROM wharf.provider_event WHERE id = $1', [ids.head])).rows[0]!.scope_key;
    // Destinations: one with a rule of its own for the rule routes, and a DEAD delivery (routed by a rule taking
    // one subject, claimed and failed for good) for the delivery routes.
    const ring = parseKeyRing(testSecretKeys);
    const destination = await createDestination(db.pool, ring, String(W), { name: 'doomed', url: 'https://app.example.test/in' });
    ids.destinations = destination.id;
    ids['destination-rules'] = (await createDestinationRule(db.pool, String(W), String(destination.id), { event_types: ['never.*'] })).id;
    const subject = 'repo:acme/forwarded';
    await createDestinationRule(db.pool, String(W), String(destination.id), { subject_prefix: subject });
    await admitEvent(db.pool, connection, { subject });
    const claimed = await db.pool.query<{ delivery_id: string; epoch: string }>(`SELECT delivery_id, epoch FROM wharf.claim_deliveries('doc', 10)`);
    for (const row of claimed.rows) {
      await db.pool.query(`SELECT wharf.fail_delivery($1, $2, 'permanent', 'HttpStatus400', 400, 1, '')`, [row.delivery_id, row.epoch]);
    }
    ids.deliveries = Number(claimed.rows[0]!.delivery_id);
  });

  afterAll(async () => {
    await served?.close();
  });

  /** A value for a required property, from its schema, as a generic client's example would be. */
  function sample(schema: JsonSchema, document: OpenApiDocument, name = ''): unknown {
    if (schema.$ref) return sample(document.components!.schemas![schema.$ref.split('/').at(-1)!]!, document, name);
    if (schema.enum) return schema.enum[0];
    if (schema.anyOf) return sample(schema.anyOf[0]!, document, name);
    if (schema.oneOf) return sample(schema.oneOf[0]!, document, name);
    // A rule's filter: one that is valid (an empty one is not).
    if (name === 'filter') return { payload: { hello: 'world' } };
    const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== 'null') : schema.type;
    if (type === 'object') {
      return Object.fromEntries((schema.required ?? []).map((key) => [key, sample(schema.properties![key]!, document, key)]));
    }
    if (type === 'integer' || type === 'number') return name === 'event_id' ? ids.head : 7;
    if (type === 'boolean') return false;
    if (type === 'array') return [];
    // Strings: what this API's own strings are about, by their property's name.
    return { provider: 'generic', source: fixtureSource, kind: 'webhook', subject: 'repo:acme/doc', name: 'doc-client', scope_key: headScope, url: 'https://alerts.example.test/in' }[name] ?? 'example';
  }

  it('reaches every documented operation at the server the document names, with the documented answer', async () => {
    const documentUrl = `${served.url}/api/openapi.json`;
    const document = await (await fetch(documentUrl)).json() as OpenApiDocument;
    // The server URL is resolved against the document's own URL, as OpenAPI says and Swagger UI does.
    const server = new URL(document.servers?.[0]?.url ?? '/', documentUrl).href.replace(/\/+$/, '');
    const calls: string[] = [];
    for (const [template, operations] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        const path = template.replaceAll(/\{(\w+)\}/g, (_, name: string) => {
          if (name === 'ws') return String(W);
          const collection = /\/([\w-]+)\/\{id\}/.exec(template)![1]!;
          // The instance's alert rules are not a workspace's.
          if (template.includes('alert-rules/')) {
            return String(ids[`${template.startsWith('/alert-rules/') ? 'instance-' : ''}alert-rule${template.endsWith('/test') ? '-tests' : 's'}`]);
          }
          return String(ids[collection]);
        });
        const body = operation.requestBody?.content['application/json']?.schema;
        const response = await fetch(`${server}${path}`, {
          method: method.toUpperCase(),
          headers: { authorization: `Bearer ${adminToken}`, ...(body ? { 'content-type': 'application/json' } : {}) },
          ...(body ? { body: JSON.stringify(sample(body, document)) } : {}),
        });
        const answer = await response.text();
        const call = `${method.toUpperCase()} ${template} → ${response.status}`;
        calls.push(call);
        expect(response.headers.get('content-type'), `${call}: ${answer}`).toMatch(/^application\/json/);
        expect(JSON.parse(answer), call).not.toMatchObject({ message: 'no such route' });
        expect(Object.keys(operation.responses), `${call}: ${answer}`).toContain(String(response.status));
        // Each call is one a client would make: it succeeds.
        expect(response.status, `${call}: ${answer}`).toBeLessThan(300);
      }
    }
    expect(calls).toHaveLength(Object.values(document.paths).flatMap((operations) => Object.keys(operations)).length);
  });

  it('names the server where the API is mounted, whatever that is', async () => {
    const atRoot = operatorApi({ db: db.pool, adminToken });
    expect((await (await atRoot.request('/openapi.json')).json() as OpenApiDocument).servers).toEqual([{ url: '/', description: 'this API' }]);
    const document = await (await fetch(`${served.url}/api/openapi.json`)).json() as OpenApiDocument;
    expect(document.servers).toEqual([{ url: '/api', description: 'this API' }]);
  });
});
