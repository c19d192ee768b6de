import { expect, it } from 'vitest';
import { LazyAbort } from '../../worker/lazy-abort.js';

it('aborts a signal read before the abort', () => {
  const abort = new LazyAbort();
  const signal = abort.signal;
  let heard: unknown;
  signal.addEventListener('abort', () => {
    heard = signal.reason;
  });
  const reason = new Error('stopping');
  abort.abort(reason);
  expect(signal.aborted).toBe(true);
  expect(heard).toBe(reason);
  expect(abort.signal).toBe(signal);
});

it('hands out an aborted signal when the abort came first', () => {
  const abort = new LazyAbort();
  const reason = new Error('lease lost');
  abort.abort(reason);
  expect(abort.aborted).toBe(true);
  expect(abort.reason).toBe(reason);
  expect(abort.signal.aborted).toBe(true);
  expect(abort.signal.reason).toBe(reason);
});

it('keeps the first reason, as AbortController does', () => {
  const abort = new LazyAbort();
  const first = new Error('timeout');
  abort.abort(first);
  abort.abort(new Error('stopping'));
  expect(abort.reason).toBe(first);
  expect(abort.signal.reason).toBe(first);
});

it('is not aborted until told', () => {
  const abort = new LazyAbort();
  expect(abort.aborted).toBe(false);
  expect(abort.reason).toBeUndefined();
  expect(abort.signal.aborted).toBe(false);
});
