// The one constant-time comparison of secrets, signatures and tokens, for the
// edge (signatures) and the operator surface (CSRF tokens) alike. Plain
// JavaScript rather than node:crypto's timingSafeEqual, so that it runs
// wherever its callers do (workerd, Node, the console's Web Crypto code).

/**
 * True when `a` and `b` are equal, compared in time that depends only on
 * their lengths, which are public (a digest's length is fixed by its
 * algorithm; a token's by its format).
 */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean;
export function constantTimeEqual(a: string, b: string): boolean;
export function constantTimeEqual(a: Uint8Array | string, b: Uint8Array | string): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  if (typeof a === 'string' || typeof b === 'string') {
    const [x, y] = [String(a), String(b)];
    for (let i = 0; i < x.length; i++) difference |= x.charCodeAt(i) ^ y.charCodeAt(i);
  } else {
    for (let i = 0; i < a.length; i++) difference |= a[i]! ^ b[i]!;
  }
  return difference === 0;
}
