// The one format of every duration the CLI takes or prints: a number and a
// unit, `250ms`, `30s`, `5m`, `2h`, `2d`. A bare number is refused: whether
// `120000` means milliseconds or seconds is what the reader cannot tell.
const units = [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1_000], ['ms', 1]] as const;
const unitMs: Record<string, number> = Object.fromEntries(units);

export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(text.trim());
  if (!match?.[1] || !match[2]) {
    throw new Error(`not a duration: ${JSON.stringify(text)} (a number and a unit: 500ms, 30s, 5m, 2h, 2d)`);
  }
  const ms = Math.round(Number(match[1]) * unitMs[match[2]]!);
  if (!(ms > 0)) throw new Error(`a duration must be positive, not ${JSON.stringify(text)}`);
  return ms;
}

/** `ms` as it would be typed: in the largest unit that holds it exactly (120000 → `2m`, 90000 → `90s`). */
export function formatDuration(ms: number): string {
  for (const [unit, size] of units) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
