// The one positive-integer reading and the one backoff formula every part uses.
import { describe, expect, it } from 'vitest';
import { backoff, equalJitter, sleep, spread } from '../../db/backoff.js';
import { parsePositiveInteger } from '../../db/numbers.js';

describe('parsePositiveInteger', () => {
  it('reads a positive safe integer from text or a number, and nothing else', () => {
    expect(parsePositiveInteger('25')).toBe(25);
    expect(parsePositiveInteger(7)).toBe(7);
    for (const refused of ['-5', '0', '2.5', '', '  ', '1e400', '12abc', -1, 0, Number.MAX_SAFE_INTEGER + 1, undefined, null]) {
      expect(parsePositiveInteger(refused)).toBeUndefined();
    }
  });
});

describe('backoff', () => {
  it('waits between half and all of the bounded exponential delay', () => {
    for (let attempt = 0; attempt < 12; attempt += 1) {
      const bound = Math.min(5_000, 100 * 2 ** attempt);
      for (let i = 0; i < 50; i += 1) {
        const wait = backoff(attempt, 100, 5_000);
        expect(wait).toBeGreaterThanOrEqual(bound / 2);
        expect(wait).toBeLessThanOrEqual(bound);
      }
    }
    expect(equalJitter(0)).toBe(0);
    const spreadMs = spread(1_000);
    expect(spreadMs).toBeGreaterThanOrEqual(750);
    expect(spreadMs).toBeLessThanOrEqual(1_250);
  });

  it('sleep ends early with the reason of an aborted signal', async () => {
    const abort = new AbortController();
    const slept = sleep(60_000, abort.signal);
    abort.abort(new Error('stopped'));
    await expect(slept).rejects.toThrow('stopped');
    await expect(sleep(1, AbortSignal.abort(new Error('already')))).rejects.toThrow('already');
  });
});
