// The benchmark's payload: a GitHub-push-shaped JSON object of about 2 KB,
// carrying the ordering key and sequence number the handlers check.

const filler = Array.from({ length: 10 }, (_, i) => ({
  id: `c0ffee${i.toString(16).padStart(34, '0')}`,
  message: `Refactor module ${i} for the benchmark payload`,
  timestamp: '2025-11-30T03:00:00Z',
  added: [`src/module-${i}.ts`],
  modified: [],
}));

export interface BenchMark {
  key: string;
  seq: number;
}

export function makePayload(key: string, seq: number): Record<string, unknown> {
  return {
    ref: 'refs/heads/main',
    bench: { key, seq },
    repository: { id: 1, full_name: key.replace(/^repo:/, ''), private: false },
    installation: { id: 1 },
    commits: filler,
  };
}

/** The same payload as a JSON text, for set-based loads that splice in key and seq. */
export const payloadTemplate = JSON.stringify(makePayload('', 0));

export function readMark(payload: unknown): BenchMark {
  const mark = (payload as { bench?: Partial<BenchMark> } | null)?.bench;
  if (typeof mark?.key !== 'string' || typeof mark.seq !== 'number') {
    throw new Error('bench payload without its key and seq');
  }
  return { key: mark.key, seq: mark.seq };
}
