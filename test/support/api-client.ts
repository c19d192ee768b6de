// Calls the operator API the way the edge mounts it, in process.
import { Hono } from 'hono';
import { parseKeyRing } from '../../db/secret-box.js';
import { operatorApi, type OperatorApiDeps } from '../../operator/api/app.js';
import { testSecretKeys } from './edge-fixtures.js';

export const adminToken = 'test-admin-token-0123456789abcdef';

export interface ApiResponse {
  status: number;
  body: Record<string, unknown> & { error?: string };
  headers: Headers;
}

export type ApiCall = (method: string, path: string, options?: { token?: string; body?: unknown }) => Promise<ApiResponse>;

export function apiClient(deps: OperatorApiDeps): ApiCall {
  // The test key ring unless the test gives another.
  const app = new Hono().route('/api', operatorApi({ keyRing: parseKeyRing(testSecretKeys), ...deps }));
  return async (method, path, options = {}) => {
    const headers: Record<string, string> = {};
    if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
    let body: string | undefined;
    if (options.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
    }
    const response = await app.request(`/api${path}`, { method, headers, body });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : {}, headers: response.headers };
  };
}
