// The claim loop's memory of the next retry (worker/next-due.ts): a retry
// scheduled while a read of wharf.next_due_at is under way may have committed
// after that read's snapshot, so the read must not mark it seen. Otherwise an
// idle host sleeps the whole poll interval past it.
import { expect, it } from 'vitest';
import { NextDue } from '../../worker/next-due.js';

it('reads again when a retry was scheduled while the last read ran', async () => {
  const nextDue = new NextDue();
  expect(nextDue.needsReading).toBe(true);
  await nextDue.refresh(async () => {
    // The failing handler's write commits while the read is in flight.
    nextDue.retryScheduled();
    return null;
  });
  expect(nextDue.needsReading).toBe(true);
  expect(nextDue.sleepMs(60_000)).toBe(60_000);

  await nextDue.refresh(async () => 250);
  expect(nextDue.needsReading).toBe(false);
  expect(nextDue.sleepMs(60_000)).toBeGreaterThan(200);
  expect(nextDue.sleepMs(60_000)).toBeLessThanOrEqual(250);
});

it('reads again once the retry it knows of is past', async () => {
  const nextDue = new NextDue();
  await nextDue.refresh(async () => 0);
  expect(nextDue.needsReading).toBe(true);
  await nextDue.refresh(async () => null);
  expect(nextDue.needsReading).toBe(false);
  nextDue.retryScheduled();
  expect(nextDue.needsReading).toBe(true);
});
