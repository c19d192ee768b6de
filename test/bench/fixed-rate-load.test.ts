// The scenarios' load (bench/scenarios/load.ts) without a database: a fixed
// rate offers what its schedule says, and the capacity probe's saturating
// load keeps every scope sending back to back, one delivery in flight per
// scope, in order, and stops offering when stopped.
import { describe, expect, it } from 'vitest';
import { FixedRateLoad, sleep, type Delivery, type Outcome } from '../../bench/scenarios/load.js';

/** A system that takes a delivery after `ms`, recording how many of each scope were in flight at once. */
function recordingSystem(ms: number) {
  const inFlight = new Map<number, number>();
  const sent: Delivery[] = [];
  let mostInFlightPerScope = 0;
  const send = async (delivery: Delivery): Promise<Outcome> => {
    const now = (inFlight.get(delivery.scope) ?? 0) + 1;
    inFlight.set(delivery.scope, now);
    mostInFlightPerScope = Math.max(mostInFlightPerScope, now);
    sent.push(delivery);
    await sleep(ms);
    inFlight.set(delivery.scope, now - 1);
    return { kind: 'accepted', status: 202 };
  };
  return { send, sent, mostInFlightPerScope: () => mostInFlightPerScope };
}

describe('the scenarios load', () => {
  it('offers the fixed rate it was given, whatever the system could take', async () => {
    const system = recordingSystem(1);
    const load = new FixedRateLoad({ rate: 100, scopes: 10, retryCapMs: 100, send: system.send });
    const began = Date.now();
    load.start(began);
    await sleep(300);
    const elapsed = Date.now() - began;
    expect(await load.stop(5_000)).toBe(0);
    // The schedule's count at most, however late the timer ran: not the system's pace (it takes one per ms per scope).
    expect(load.acknowledged.length).toBeGreaterThan(0);
    expect(load.acknowledged.length).toBeLessThanOrEqual(Math.ceil((elapsed * 100) / 1000));
  });

  it('saturating, keeps every scope sending back to back, one at a time and in order, until stopped', async () => {
    const system = recordingSystem(5);
    const load = new FixedRateLoad({ rate: 'saturate', scopes: 4, retryCapMs: 100, send: system.send });
    load.start(Date.now());
    await sleep(500);
    expect(await load.stop(5_000)).toBe(0);
    const sentAtStop = system.sent.length;
    await sleep(100);
    expect(system.sent.length, 'nothing offered after the stop').toBe(sentAtStop);

    expect(system.mostInFlightPerScope()).toBe(1);
    // Every scope sent, in order, and the next as soon as the last was taken: nothing waited on a schedule.
    for (let scope = 0; scope < 4; scope += 1) {
      const seqs = load.acknowledged.filter((a) => a.scope === scope).map((a) => a.seq);
      expect(seqs).toEqual(seqs.map((_, i) => i));
      expect(seqs.length).toBeGreaterThan(1);
    }
    expect(load.offered.reduce((sum, n) => sum + n, 0)).toBe(load.acknowledged.length);
  });
});
