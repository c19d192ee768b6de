// Secrets the operator API hands out or checks: workspace API tokens and
// connection webhook secrets. The database stores a token's SHA-256 only.
// node:crypto, which workerd provides under `nodejs_compat`.
import { createHash, randomBytes } from 'node:crypto';
import { constantTimeEqual } from '../../db/constant-time.js';

const workspaceTokenPrefix = 'wharf_ws_';

/** A new workspace token: a prefix (easy to find in a leak scan) and 256 random bits. */
export function generateWorkspaceToken(): string {
  return workspaceTokenPrefix + randomBytes(32).toString('hex');
}

export function looksLikeWorkspaceToken(token: string): boolean {
  return token.startsWith(workspaceTokenPrefix) && token.length <= 200;
}

export function tokenHashHex(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** Compares two secrets in constant time, hashing both first so that not even their lengths leak. */
export function sameSecret(presented: string, expected: string): boolean {
  return constantTimeEqual(createHash('sha256').update(presented).digest(), createHash('sha256').update(expected).digest());
}

/** A new webhook secret for a connection: Standard Webhooks' whsec_<base64> for generic, hex otherwise. */
export function generateWebhookSecret(provider: string): string {
  return provider === 'generic' ? `whsec_${randomBytes(32).toString('base64')}` : randomBytes(32).toString('hex');
}
