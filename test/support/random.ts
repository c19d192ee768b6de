// Randomness a failure can replay: every test that draws random numbers draws
// them from a seeded generator, whose seed is WHARF_TEST_SEED when set (a
// replay) and a fresh one otherwise, and a failing test prints the seed and
// the command that replays it.
//
//   const seed = fileSeed(import.meta.url);   // at the top of a test file
//   const random = Rng.seeded(seed);           // or Rng.for(seed, stream, index)
//
// A seed replays the draws, not the scheduling: in a race the interleaving is
// the machine's, so a replay makes the same inputs, not the same schedule.
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeEach } from 'vitest';

/** mulberry32: a small, fast 32-bit generator; plenty for test inputs. */
export function mulberry32(state: number): () => number {
  let a = state >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A 32-bit hash finalizer (murmur3's), to derive independent streams from one seed. */
export function mix(value: number): number {
  let h = value >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

export const alnum = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';

export class Rng {
  constructor(private readonly next: () => number) {}

  /** One generator for the whole seed. */
  static seeded(seed: number): Rng {
    return new Rng(mulberry32(mix(seed)));
  }

  /** Stream `stream`'s generator number `index`: the same whatever was drawn from the others. */
  static for(seed: number, stream: number, index: number): Rng {
    return new Rng(mulberry32(mix(seed ^ mix(stream * 0x9e3779b1 + index))));
  }

  float(): number {
    return this.next();
  }

  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(0, items.length - 1)]!;
  }

  weighted<T>(table: readonly (readonly [number, T])[]): T {
    let roll = this.next() * table.reduce((sum, [weight]) => sum + weight, 0);
    for (const [weight, item] of table) {
      roll -= weight;
      if (roll < 0) return item;
    }
    return table.at(-1)![1];
  }

  /** A new array: `items` in a uniformly random order (Fisher–Yates). */
  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i -= 1) {
      const j = this.int(0, i);
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  }

  bytes(n: number): Uint8Array<ArrayBuffer> {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i += 1) out[i] = this.int(0, 255);
    return out;
  }

  /** `n` characters drawn from `alphabet`. */
  token(n: number, alphabet = alnum): string {
    let out = '';
    for (let i = 0; i < n; i += 1) out += alphabet[this.int(0, alphabet.length - 1)];
    return out;
  }
}

/**
 * The seed of this run: `variable` (WHARF_TEST_SEED, or another the caller
 * names first) when set, an integer in [0, 2^32); a fresh random one
 * otherwise. A malformed value is an error, never a silent fresh seed.
 */
export function readSeed(variables: string[] = ['WHARF_TEST_SEED']): number {
  for (const variable of variables) {
    const given = process.env[variable];
    if (given === undefined || given === '') continue;
    const value = Number(given);
    if (!Number.isInteger(value) || value < 0 || value >= 2 ** 32) throw new Error(`${variable} is an integer in [0, 2^32), not ${given}`);
    return value;
  }
  return Math.floor(Math.random() * 2 ** 32);
}

/** The command that replays `file` (an import.meta.url or a path) with `seed`. */
export function replayCommand(file: string, seed: number, variable = 'WHARF_TEST_SEED'): string {
  const path = file.startsWith('file:') ? fileURLToPath(file) : file;
  return `${variable}=${seed} npx vitest run ${relative(process.cwd(), path)}`;
}

/**
 * The seed of a test file (readSeed), with a hook that prints it and the
 * replay command when any of the file's tests fails. Call it once at the top
 * level of the file.
 */
export function fileSeed(file: string, variables: string[] = ['WHARF_TEST_SEED']): number {
  const seed = readSeed(variables);
  const command = replayCommand(file, seed, variables[0]);
  beforeEach((context) => {
    context.onTestFailed(() => {
      console.error(`random seed ${seed} (${context.task.name}); replay with: ${command}`);
    });
  });
  return seed;
}
