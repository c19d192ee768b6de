// Hashing and byte helpers shared by the adapters. HMAC and SHA-256 come
// from `node:crypto`, which workerd provides under the `nodejs_compat` flag
// (wrangler.toml), so the same code runs in Node and in workerd. Not WebCrypto:
// in Node its sign() is a job with a promise around it, which cost about
// 100 µs per 2 KB delivery, against a few µs for a synchronous createHmac.
import { Buffer } from 'node:buffer';
import { createHash, createHmac } from 'node:crypto';

const encoder = new TextEncoder();

export type Bytes = Uint8Array<ArrayBuffer>;

export function utf8(text: string): Bytes {
  return encoder.encode(text);
}

export function bytesOf(data: Bytes | string): Bytes {
  return typeof data === 'string' ? utf8(data) : data;
}

export function concatBytes(...parts: Bytes[]): Bytes {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

export async function hmacSha256(key: Bytes | string, message: Bytes | string): Promise<Bytes> {
  return new Uint8Array(createHmac('sha256', key).update(message).digest());
}

export async function sha256(data: Bytes | string): Promise<Bytes> {
  return new Uint8Array(createHash('sha256').update(data).digest());
}

/** The SHA-256 in lower-case hex, straight from the hash (no bytes to convert). */
export function sha256Hex(data: Bytes | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/** HMAC with `algorithm` (sha1: Twilio; sha512: a configured source). */
export function hmacWith(algorithm: 'sha1' | 'sha256' | 'sha512', key: Bytes | string, message: Bytes | string): Bytes {
  return new Uint8Array(createHmac(algorithm, key).update(message).digest());
}

// Hex through Buffer (node:buffer, which workerd provides under nodejs_compat
// like node:crypto): native, where a loop of per-byte strings cost a few µs
// for every signature checked.
export function toHex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}

/** undefined for anything that is not an even-length hex string. */
export function fromHex(hex: string): Bytes | undefined {
  if (hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) return undefined;
  const out = new Uint8Array(hex.length / 2);
  out.set(Buffer.from(hex, 'hex'));
  return out;
}

export function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

/** undefined for anything that is not valid base64. */
export function fromBase64(text: string): Bytes | undefined {
  try {
    const binary = atob(text);
    return Uint8Array.from(binary, (char) => char.charCodeAt(0));
  } catch {
    return undefined;
  }
}
