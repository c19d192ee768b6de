// Reading facts out of a verified JSON body.
import { jsonSourceAt } from '../json-source.js';
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

/**
 * A non-empty string, or a number as its text (providers send ids either
 * way). A number that is not a safe integer is read as the body wrote it
 * when `value` is a parsed body (jsonSourceAt): its double would drop the
 * digits of an id past 2^53, and merge two ids that differ only there.
 */
export function textAt(value: unknown, ...path: (string | number)[]): string | undefined {
  const found = at(value, ...path);
  if (typeof found === 'string') return found === '' ? undefined : found;
  if (typeof found !== 'number') return undefined;
  if (Number.isSafeInteger(found)) return String(found);
  return jsonSourceAt(value, path) ?? (Number.isFinite(found) ? String(found) : undefined);
}

/** `prefix + value` for each value present, in order: the subjects, most specific first. */
export function subjectsOf(...candidates: [prefix: string, value: string | undefined][]): string[] {
  // A loop, not flatMap: flatMap allocates an array per candidate, on every delivery.
  const subjects: string[] = [];
  for (const [prefix, value] of candidates) if (value !== undefined) subjects.push(prefix + value);
  return subjects;
}

/** RFC 6901: textAt of the value that `pointer` ("/data/customer_id") names in `document`. */
export function textAtPointer(document: JsonObject, pointer: string): string | undefined {
  const tokens = pointerTokens(pointer);
  return tokens.length === 0 ? undefined : textAt(document, ...tokens);
}

/** The unescaped reference tokens of a JSON pointer; none for a malformed one. */
export function pointerTokens(pointer: string): string[] {
  if (!pointer.startsWith('/')) return [];
  return pointer.slice(1).split('/').map((token) => token.replaceAll('~1', '/').replaceAll('~0', '~'));
}
