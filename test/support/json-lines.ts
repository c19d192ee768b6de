// Reading what a process logged: its JSON lines (pino's), anything else it
// printed left out.

/** The JSON objects among `text`'s lines, in order; lines that are not a JSON object are skipped. */
export function jsonLines<T extends object = Record<string, unknown>>(text: string): T[] {
  return text.split('\n').flatMap((line) => {
    if (!line.trimStart().startsWith('{')) return [];
    try {
      const entry: unknown = JSON.parse(line);
      return typeof entry === 'object' && entry !== null && !Array.isArray(entry) ? [entry as T] : [];
    } catch {
      return [];
    }
  });
}
