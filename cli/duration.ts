// Parses a CLI duration: `250ms`, `10s`, `5m`, `1h`, or plain milliseconds.
const units: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (!match?.[1]) throw new Error(`not a duration: ${JSON.stringify(text)} (use e.g. 500ms, 10s, 5m, 1h)`);
  const ms = Number(match[1]) * (units[match[2] ?? 'ms'] ?? 1);
  if (!(ms > 0)) throw new Error(`a duration must be positive, not ${JSON.stringify(text)}`);
  return ms;
}
