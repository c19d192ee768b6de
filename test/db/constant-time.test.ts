// The one constant-time comparison (db/constant-time.ts), used by the edge's
// signature checks, the API's token check and the console's CSRF check.
import { expect, it } from 'vitest';
import { constantTimeEqual } from '../../db/constant-time.js';

it('says equal only for the same bytes or the same text, of the same length', () => {
  const bytes = (...values: number[]) => new Uint8Array(values);
  expect(constantTimeEqual(bytes(1, 2, 3), bytes(1, 2, 3))).toBe(true);
  expect(constantTimeEqual(bytes(1, 2, 3), bytes(1, 2, 4))).toBe(false);
  expect(constantTimeEqual(bytes(1, 2, 3), bytes(1, 2))).toBe(false);
  expect(constantTimeEqual(bytes(), bytes())).toBe(true);
  expect(constantTimeEqual('token-é', 'token-é')).toBe(true);
  expect(constantTimeEqual('token-a', 'token-b')).toBe(false);
  expect(constantTimeEqual('token', 'token-')).toBe(false);
  // A difference in the first position only, and in the last only.
  expect(constantTimeEqual('xbc', 'abc')).toBe(false);
  expect(constantTimeEqual('abx', 'abc')).toBe(false);
});
