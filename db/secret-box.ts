// Connection signing keys at rest: AES-256-GCM under a key ring that the
// database never sees (WHARF_SECRET_KEYS: comma-separated `<key id>:<base64
// of 32 random bytes>`, newest first). The newest key encrypts; every key of
// the ring decrypts what it encrypted. The edge decrypts, the CLI and the
// operator API encrypt; both meet here and in SQL only. WebCrypto, which
// Node and workerd both have. The connection id is the additional data, so a
// ciphertext copied to another connection does not decrypt.
export interface KeyRing {
  /** Newest first. */
  keys: { id: string; key: CryptoKey }[];
}

const prefix = 'aes256gcm';
const keyIdPattern = /^[A-Za-z0-9_.-]{1,32}$/;

/** A problem with the key ring or a stored secret; the message names no secret. */
export class SecretKeyError extends Error {
  override name = 'SecretKeyError';
}

function fromBase64(text: string): Uint8Array<ArrayBuffer> {
  const binary = atob(text);
  return Uint8Array.from(binary, (char) => char.charCodeAt(0));
}

function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

/** undefined when `text` is empty or unset; a SecretKeyError when it is malformed. */
export async function parseKeyRing(text: unknown): Promise<KeyRing | undefined> {
  if (typeof text !== 'string' || text.trim() === '') return undefined;
  const keys = await Promise.all(text.split(',').map(async (entry, index) => {
    const at = entry.indexOf(':');
    const id = entry.slice(0, at).trim();
    let raw: Uint8Array<ArrayBuffer>;
    try {
      raw = fromBase64(entry.slice(at + 1).trim());
    } catch {
      raw = new Uint8Array();
    }
    if (at < 0 || !keyIdPattern.test(id) || raw.length !== 32) {
      throw new SecretKeyError(`WHARF_SECRET_KEYS: entry ${index + 1} is not <key id>:<base64 of 32 bytes>`);
    }
    return { id, key: await crypto.subtle.importKey('raw', raw, 'AES-GCM', false, ['encrypt', 'decrypt']) };
  }));
  if (new Set(keys.map((key) => key.id)).size !== keys.length) throw new SecretKeyError('WHARF_SECRET_KEYS: key ids repeat');
  return { keys };
}

/** A new key-ring entry, `<id>:<base64 of 32 random bytes>`. */
export function generateKeyRingEntry(id: string): string {
  if (!keyIdPattern.test(id)) throw new SecretKeyError('a key id is 1 to 32 letters, digits or _.-');
  return `${id}:${toBase64(crypto.getRandomValues(new Uint8Array(32)))}`;
}

/**
 * Whose secret a stored value is: a connection's (its id) or a
 * destination's. The owner is the additional data, so a ciphertext copied to
 * another owner, or from a connection to a destination, does not decrypt.
 */
export type SecretOwner = number | string | { destinationId: number | string };

function ownerName(owner: SecretOwner): string {
  return typeof owner === 'object' ? `destination ${owner.destinationId}` : `connection ${owner}`;
}

function additionalData(owner: SecretOwner): Uint8Array<ArrayBuffer> {
  return new TextEncoder().encode(
    typeof owner === 'object' ? `wharf:destination:${owner.destinationId}` : `wharf:connection:${owner}`);
}

export function isEncrypted(stored: string): boolean {
  return stored.startsWith(`${prefix}:`);
}

/** The key id a stored secret was encrypted under; undefined for plaintext stored before 0.2.0. */
export function keyIdOf(stored: string): string | undefined {
  return isEncrypted(stored) ? stored.split(':')[1] : undefined;
}

export async function encryptSecret(ring: KeyRing, owner: SecretOwner, secret: string): Promise<string> {
  const newest = ring.keys[0]!;
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const sealed = await crypto.subtle.encrypt(
    { name: 'AES-GCM', iv, additionalData: additionalData(owner) }, newest.key, new TextEncoder().encode(secret));
  return `${prefix}:${newest.id}:${toBase64(iv)}:${toBase64(new Uint8Array(sealed))}`;
}

/**
 * The secret a stored value holds. A value stored in plaintext before
 * release 0.2.0 is returned as it is (`wharf secrets reencrypt` encrypts it).
 */
export async function decryptSecret(ring: KeyRing | undefined, owner: SecretOwner, stored: string): Promise<string> {
  if (!isEncrypted(stored)) return stored;
  const [, id, iv, sealed] = stored.split(':');
  const key = ring?.keys.find((candidate) => candidate.id === id);
  if (!key) throw new SecretKeyError(`no key ${JSON.stringify(id)} in WHARF_SECRET_KEYS for ${ownerName(owner)}`);
  try {
    const opened = await crypto.subtle.decrypt(
      { name: 'AES-GCM', iv: fromBase64(iv!), additionalData: additionalData(owner) }, key.key, fromBase64(sealed!));
    return new TextDecoder().decode(opened);
  } catch {
    throw new SecretKeyError(`the secret of ${ownerName(owner)} does not decrypt under key ${JSON.stringify(id)}`);
  }
}
