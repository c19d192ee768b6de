// Secrets the operator API hands out or checks: workspace API tokens and
// connection webhook secrets. Hashing from edge/crypto.ts, so the same
// code runs in workerd and Node. The database stores a token's SHA-256 only.
import { constantTimeEqual, sha256, toBase64, toHex } from '../crypto.js';

const workspaceTokenPrefix = 'wharf_ws_';

function randomBytes(): Uint8Array {
  return crypto.getRandomValues(new Uint8Array(32));
}

/** A new workspace token: a prefix (easy to find in a leak scan) and 256 random bits. */
export function generateWorkspaceToken(): string {
  return workspaceTokenPrefix + toHex(randomBytes());
}

export function looksLikeWorkspaceToken(token: string): boolean {
  return token.startsWith(workspaceTokenPrefix) && token.length <= 200;
}

export async function tokenHashHex(token: string): Promise<string> {
  return toHex(await sha256(token));
}

/** Compares two secrets in constant time, hashing both first so that not even their lengths leak. */
export async function sameSecret(presented: string, expected: string): Promise<boolean> {
  const [a, b] = await Promise.all([sha256(presented), sha256(expected)]);
  return constantTimeEqual(a, b);
}

/** A new webhook secret for a connection: Standard Webhooks' whsec_<base64> for generic, hex otherwise. */
export function generateWebhookSecret(provider: string): string {
  return provider === 'generic' ? `whsec_${toBase64(randomBytes())}` : toHex(randomBytes());
}
