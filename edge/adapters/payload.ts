// Reading facts out of a verified JSON body.
import type { JsonObject } from '../request-body.js';

/** The value at `path` under `value`, or undefined. */
export function at(value: unknown, ...path: (string | number)[]): unknown {
  let current = value;
  for (const key of path) {
    if (typeof current !== 'object' || current === null) return undefined;
    current = (current as Record<string | number, unknown>)[key];
  }
  return current;
}

/** A non-empty string or a finite number as text (providers send ids either way). */
export function textAt(value: unknown, ...path: (string | number)[]): string | undefined {
  const found = at(value, ...path);
  if (typeof found === 'string') return found === '' ? undefined : found;
  if (typeof found === 'number' && Number.isFinite(found)) return String(found);
  return undefined;
}

/** `prefix + value` for each value present, in order: the subjects, most specific first. */
export function subjectsOf(...candidates: [prefix: string, value: string | undefined][]): string[] {
  // A loop, not flatMap: flatMap allocates an array per candidate, on every delivery.
  const subjects: string[] = [];
  for (const [prefix, value] of candidates) if (value !== undefined) subjects.push(prefix + value);
  return subjects;
}

/** RFC 6901: the value that `pointer` ("/data/customer_id") names in `document`. */
export function atPointer(document: JsonObject, pointer: string): unknown {
  const tokens = pointerTokens(pointer);
  return tokens.length === 0 ? undefined : at(document, ...tokens);
}

/** The unescaped reference tokens of a JSON pointer; none for a malformed one. */
export function pointerTokens(pointer: string): string[] {
  if (!pointer.startsWith('/')) return [];
  return pointer.slice(1).split('/').map((token) => token.replaceAll('~1', '/').replaceAll('~0', '~'));
}
