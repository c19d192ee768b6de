// One timer keeps every running handler's deadline (worker/handler-deadlines.ts):
// each handler times out at its own deadline, not at a neighbour's, one that
// ended never times out, and no timer is left once none runs.
import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { HandlerDeadlines } from '../../worker/handler-deadlines.js';

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
});
afterEach(() => {
  vi.useRealTimers();
});

function handler(name: string, log: string[]) {
  return { timedOut: () => log.push(name) };
}

it('times each handler out at its own deadline, with one timer for them all', () => {
  const log: string[] = [];
  const deadlines = new HandlerDeadlines();
  deadlines.watch(handler('first', log), 1_000);
  vi.advanceTimersByTime(400);
  deadlines.watch(handler('second', log), 1_000);
  expect(vi.getTimerCount()).toBe(1);

  vi.advanceTimersByTime(599);
  expect(log).toEqual([]);
  vi.advanceTimersByTime(1);
  expect(log).toEqual(['first']);
  vi.advanceTimersByTime(399);
  expect(log).toEqual(['first']);
  vi.advanceTimersByTime(1);
  expect(log).toEqual(['first', 'second']);
  expect(vi.getTimerCount()).toBe(0);
});

it('never times out a handler that ended, and keeps no timer once none runs', () => {
  const log: string[] = [];
  const deadlines = new HandlerDeadlines();
  const ended = handler('ended', log);
  deadlines.watch(ended, 1_000);
  deadlines.watch(handler('running', log), 1_500);
  vi.advanceTimersByTime(500);
  deadlines.forget(ended);
  vi.advanceTimersByTime(1_000);
  expect(log).toEqual(['running']);
  expect(vi.getTimerCount()).toBe(0);

  deadlines.watch(ended, 1_000);
  deadlines.forget(ended);
  expect(vi.getTimerCount()).toBe(0);
});

it('moves the timer earlier for a handler with a shorter timeout (the setting changed)', () => {
  const log: string[] = [];
  const deadlines = new HandlerDeadlines();
  deadlines.watch(handler('long', log), 10_000);
  deadlines.watch(handler('short', log), 1_000);
  vi.advanceTimersByTime(1_000);
  expect(log).toEqual(['short']);
  vi.advanceTimersByTime(9_000);
  expect(log).toEqual(['short', 'long']);
});

it('lets a handler that times out start the next, which is watched anew', () => {
  const log: string[] = [];
  const deadlines = new HandlerDeadlines();
  const next = handler('next', log);
  deadlines.watch({ timedOut: () => { log.push('first'); deadlines.watch(next, 1_000); } }, 1_000);
  vi.advanceTimersByTime(1_000);
  expect(log).toEqual(['first']);
  vi.advanceTimersByTime(1_000);
  expect(log).toEqual(['first', 'next']);
});

it('tells every handler due at once, even when telling one throws', () => {
  const log: string[] = [];
  const deadlines = new HandlerDeadlines();
  deadlines.watch({ timedOut: () => { log.push('broken'); throw new Error('a broken run'); } }, 1_000);
  deadlines.watch(handler('second', log), 1_000);
  expect(() => vi.advanceTimersByTime(1_000)).toThrow('a broken run');
  expect(log).toEqual(['broken', 'second']);
  expect(vi.getTimerCount()).toBe(0);
});
