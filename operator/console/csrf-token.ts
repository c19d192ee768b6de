// CSRF tokens without server-side state: the HMAC of the session's token (or,
// before sign-in, of a random value kept in a cookie) under a key only the
// server holds. A page of the console carries it in a hidden field; a
// cross-site form cannot know it. Web Crypto only, so the console stays
// runtime-neutral.

import { constantTimeEqual } from '../../db/constant-time.js';

const encoder = new TextEncoder();

export interface CsrfSigner {
  /** The token for a session (or login) secret. */
  sign(secret: string): Promise<string>;
  /** True when `token` is the token of `secret`, compared in constant time. */
  verify(secret: string, token: string | undefined): Promise<boolean>;
}

/**
 * The key is derived from the admin token when there is one, so that every
 * process of one installation (behind a load balancer, after a restart)
 * accepts the forms another rendered; else it is random per process.
 */
export function csrfSigner(adminToken: string | undefined): CsrfSigner {
  const key = importKey(adminToken);
  const sign = async (secret: string): Promise<string> => {
    const mac = await crypto.subtle.sign('HMAC', await key, encoder.encode(`wharf-console-csrf\u0000${secret}`));
    return base64url(new Uint8Array(mac));
  };
  return {
    sign,
    async verify(secret, token) {
      if (!token) return false;
      return constantTimeEqual(await sign(secret), token);
    },
  };
}

async function importKey(adminToken: string | undefined): Promise<CryptoKey> {
  const material = adminToken
    ? new Uint8Array(await crypto.subtle.digest('SHA-256', encoder.encode(`wharf-console-csrf-key\u0000${adminToken}`)))
    : crypto.getRandomValues(new Uint8Array(32));
  return crypto.subtle.importKey('raw', material, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
}

/** A random value for the sign-in form's cookie. */
export function randomSecret(): string {
  return base64url(crypto.getRandomValues(new Uint8Array(32)));
}

function base64url(bytes: Uint8Array): string {
  let text = '';
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}
