// The calls of sql/75-connection-secrets.sql an operator makes: setting or
// rotating a connection's webhook secret, and re-encrypting the stored
// signing keys under the newest key of the ring.
import { createHash } from 'node:crypto';
import type { Database } from '../../db/database.js';
import { isProvider, providers, secretPlaceOf } from '../../db/providers.js';
import { decryptSecret, encryptSecret, keyIdOf, type KeyRing } from '../../db/secret-box.js';
import { ApiError } from '../api/errors.js';
import { generateWebhookSecret } from '../api/tokens.js';
import { callWharf } from './call-wharf.js';
import { showConnection } from './operator.js';

/** Why an operator's chosen secret is too weak, or undefined when it will do. */
export function weakSecret(provider: string, secret: string): string | undefined {
  if (provider === 'generic') {
    const match = /^whsec_([A-Za-z0-9+/]+={0,2})$/.exec(secret);
    let bytes = 0;
    try {
      bytes = match ? atob(match[1]!).length : 0;
    } catch {
      bytes = 0;
    }
    return bytes >= 16 ? undefined : 'a Standard Webhooks secret is whsec_ and the base64 of at least 16 random bytes';
  }
  return secret.length >= 20 ? undefined : 'a webhook secret has at least 20 characters';
}

/**
 * Sets a connection's webhook secret (wharf.set_connection_secret), a new
 * random one unless given, and returns it: the only time it is shown. A
 * signing key is stored encrypted with the key ring; a GitLab token as its
 * SHA-256 only. The secret it replaces stays valid for `secret_overlap`,
 * unless `overlap` is false (a leaked secret, cut off at once).
 * 400 for GitHub and Slack (their secrets belong to the app), for a weak
 * secret, and without a key ring for a provider that signs with a key.
 */
export async function rotateConnectionSecret(
  db: Database, keyRing: KeyRing | undefined, id: string, secret?: string, overlap = true,
): Promise<string> {
  const connection = await showConnection(db, id);
  if (!connection) throw new ApiError(404, 'not_found', `unknown connection ${id}`);
  if (secret === undefined && isProvider(connection.provider) && providers[connection.provider].issuedByProvider
      && secretPlaceOf(connection.provider) !== 'app') {
    throw new ApiError(400, 'secret_required', `${connection.provider} draws this secret itself: pass the one it shows (--secret)`);
  }
  const next = secret ?? generateWebhookSecret(connection.provider);
  const weakness = weakSecret(connection.provider, next);
  if (weakness) throw new ApiError(400, 'weak_secret', weakness);
  // A token (GitLab's) goes to the database as its digest only; a signing key encrypted.
  const place = secretPlaceOf(connection.provider);
  let stored = place === 'token' ? `sha256:${createHash('sha256').update(next).digest('hex')}` : next;
  if (place === 'signing_key') {
    if (!keyRing) throw new ApiError(400, 'no_secret_keys', 'signing keys are stored encrypted: set WHARF_SECRET_KEYS');
    stored = await encryptSecret(keyRing, id, next);
  }
  await callWharf(db, 'wharf.set_connection_secret($1, $2, $3)', [id, stored, overlap]);
  return next;
}

export interface ReencryptionProgress {
  total: number;
  reencrypted: number;
}

/**
 * Re-encrypts every stored signing key (current and previous) that is not
 * under the newest key of the ring, plaintext stored before 0.2.0 included,
 * then makes the database refuse plaintext for the rows stored before too.
 */
export async function reencryptSigningKeys(
  db: Database, keyRing: KeyRing, onProgress: (progress: ReencryptionProgress) => void = () => {},
): Promise<ReencryptionProgress> {
  const newest = keyRing.keys[0]!.id;
  const { rows } = await db.query<{ connection_id: string; signing_key: string | null; previous_signing_key: string | null }>(
    'SELECT connection_id, signing_key, previous_signing_key FROM wharf.stored_signing_keys()');
  const stale = rows.flatMap((row) => [row.signing_key, row.previous_signing_key]
    .filter((stored): stored is string => stored !== null && keyIdOf(stored) !== newest)
    .map((stored) => ({ connectionId: row.connection_id, stored })));
  const progress = { total: stale.length, reencrypted: 0 };
  for (const { connectionId, stored } of stale) {
    const secret = await decryptSecret(keyRing, connectionId, stored);
    await callWharf(db, 'wharf.replace_signing_key_ciphertext($1, $2, $3)',
      [connectionId, stored, await encryptSecret(keyRing, connectionId, secret)]);
    progress.reencrypted += 1;
    onProgress(progress);
  }
  await callWharf(db, 'wharf.validate_encrypted_secrets()', []);
  return progress;
}
