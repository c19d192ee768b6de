// The API's description: /api/openapi.json is served without a token, is a
// valid OpenAPI 3.1 document, and describes every route the API registers
// (both come from the same route definitions, so this guards the wiring).
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operatorApi } from '../../operator/api/app.js';
import { adminToken, apiClient, type ApiCall } from '../support/api-client.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

let db: TestDatabase;
let api: ApiCall;

beforeAll(async () => {
  db = await createTestDatabase();
  api = apiClient({ db: db.pool, adminToken });
});

afterAll(async () => {
  await db?.drop();
});

interface OpenApiDocument {
  openapi: string;
  paths: Record<string, Record<string, { responses: Record<string, unknown>; parameters?: { name: string; in: string }[] }>>;
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

  it('documents the filters the event list validates', () => {
    const list = document.paths['/workspaces/{ws}/events']?.get;
    expect(list?.parameters?.filter((parameter) => parameter.in === 'query').map((parameter) => parameter.name).sort())
      .toEqual(['cursor', 'event_type', 'limit', 'provider', 'received_after', 'received_before', 'state', 'subject']);
  });
});
