// Every duration the CLI takes or prints has one format, the one of
// `recover --since`: a number and a unit (`250ms`, `30s`, `5m`, `2h`, `2d`).
// A bare number is refused (milliseconds or seconds? the reader cannot tell),
// and help prints each default as the user would type it.
import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from '../../cli/duration.js';
import { parseSince } from '../../cli/commands/recover.js';
import { runWharf } from '../support/wharf-cli.js';

describe('durations', () => {
  it('take a number and a unit', () => {
    expect(parseDuration('250ms')).toBe(250);
    expect(parseDuration('30s')).toBe(30_000);
    expect(parseDuration('1.5m')).toBe(90_000);
    expect(parseDuration('2h')).toBe(7_200_000);
    expect(parseDuration('2d')).toBe(172_800_000);
  });

  it('refuse a bare number, naming the format', () => {
    expect(() => parseDuration('120000')).toThrow(/not a duration: "120000" \(a number and a unit: 500ms, 30s, 5m, 2h, 2d\)/);
    expect(() => parseDuration('0s')).toThrow(/must be positive/);
  });

  it('print in the largest unit that holds them exactly, as they are typed', () => {
    expect(formatDuration(120_000)).toBe('2m');
    expect(formatDuration(60_000)).toBe('1m');
    expect(formatDuration(90_000)).toBe('90s');
    expect(formatDuration(1_500)).toBe('1500ms');
    expect(formatDuration(3 * 86_400_000)).toBe('3d');
    for (const text of ['250ms', '30s', '5m', '2h', '2d']) expect(formatDuration(parseDuration(text))).toBe(text);
  });

  it('are how --since says how long ago', () => {
    const now = Date.parse('2026-03-01T12:00:00Z');
    expect(parseSince('2d', now).toISOString()).toBe('2026-02-27T12:00:00.000Z');
    expect(parseSince('90m', now).toISOString()).toBe('2026-03-01T10:30:00.000Z');
  });
});

describe('help', () => {
  it('shows the defaults of recover --wait and --lease as durations', async () => {
    const help = await runWharf(['recover', '--help'], {});
    expect(help.code, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/--wait <duration>[^(]*\(default:\s+2m\)/);
    expect(help.stdout).toMatch(/--lease <duration>[^(]*\([^(]*\(default:\s+1m\)/);
    expect(help.stdout).not.toMatch(/120000|60000/);
  });

  it('shows the sweep lease of a worker host and its default', async () => {
    const help = await runWharf(['worker', '--help'], {});
    expect(help.code, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/--sweep-every <duration>[^(]*\([^(]*\(default:\s+5m,\s+env:\s+WHARF_SWEEP_EVERY\)/);
    expect(help.stdout).toMatch(/--sweep-lease <duration>[^(]*\([^(]*\(default:\s+1m,\s+env:\s+WHARF_SWEEP_LEASE\)/);
  });

  it('refuses a bare number for a duration option', async () => {
    const result = await runWharf(['recover', '--app', 'acme', '--wait', '120000'], { DATABASE_URL: undefined });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/--wait.*not a duration: "120000"/);
  });
});
