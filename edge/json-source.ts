// The source text of a value in a parsed JSON body. JSON.parse keeps every
// number as a double: an id past 2^53 (Shopify's and GitHub's are 64-bit)
// loses its last digits, and two ids that differ only there become one.
// Node 20's JSON.parse gives no access to a value's source text, so the
// parse remembers each document's text, and a number's digits are read back
// from it by the number's path, only when they are needed: for a number that
// is not a safe integer, never on the common path.

// Per parsed document (its root object or array): the text it was parsed from.
const sources = new WeakMap<object, string>();

/** JSON.parse, remembering `text` as the source of the object or array it returns (see jsonSourceAt). */
export function parseJson(text: string): unknown {
  const value: unknown = JSON.parse(text);
  if (typeof value === 'object' && value !== null) sources.set(value, text);
  return value;
}

/**
 * The source text of the value at `path` under `document`, a value that
 * parseJson returned: of a duplicated key, the last one's, as JSON.parse and
 * jsonb keep it. Undefined for a document parseJson did not return, or a
 * path it does not have.
 */
export function jsonSourceAt(document: unknown, path: readonly (string | number)[]): string | undefined {
  const text = typeof document === 'object' && document !== null ? sources.get(document) : undefined;
  if (text === undefined) return undefined;
  let start = skipSpace(text, 0);
  for (const key of path) {
    const member = memberStart(text, start, String(key));
    if (member === undefined) return undefined;
    start = member;
  }
  return text.slice(start, valueEnd(text, start));
}

// The scanners below read text that JSON.parse has accepted: they need not
// check its grammar, only step over it. Global regular expressions, their
// lastIndex set before each use (no await between: one use at a time).
const nonSpace = /[^ \t\n\r]/g;
const quoteOrEscape = /["\\]/g;
const stringOrBracket = /["{}[\]]/g;
const delimiter = /[ \t\n\r,\]}]/g;

function skipSpace(text: string, from: number): number {
  nonSpace.lastIndex = from;
  return nonSpace.exec(text)?.index ?? text.length;
}

/** Where the value of `key` (an index, for an array) starts in the object or array at `start`. */
function memberStart(text: string, start: number, key: string): number | undefined {
  const isArray = text[start] === '[';
  if (!isArray && text[start] !== '{') return undefined;
  const close = isArray ? ']' : '}';
  let found: number | undefined;
  let index = 0;
  let at = skipSpace(text, start + 1);
  while (text[at] !== close) {
    let name = String(index++);
    if (!isArray) {
      const nameEnd = stringEnd(text, at);
      const written = text.slice(at + 1, nameEnd - 1);
      // A name with an escape is the name it decodes to.
      name = written.includes('\\') ? JSON.parse(text.slice(at, nameEnd)) as string : written;
      at = skipSpace(text, skipSpace(text, nameEnd) + 1);
    }
    if (name === key) {
      if (isArray) return at;
      // Not returned yet: a later duplicate of the name wins.
      found = at;
    }
    at = skipSpace(text, valueEnd(text, at));
    if (text[at] === ',') at = skipSpace(text, at + 1);
  }
  return found;
}

/** Where the value at `start` ends (the index after it). */
function valueEnd(text: string, start: number): number {
  const first = text[start];
  if (first === '"') return stringEnd(text, start);
  if (first === '{' || first === '[') {
    let depth = 0;
    stringOrBracket.lastIndex = start;
    for (let match = stringOrBracket.exec(text); match; match = stringOrBracket.exec(text)) {
      if (match[0] === '"') {
        stringOrBracket.lastIndex = stringEnd(text, match.index);
      } else if (match[0] === '{' || match[0] === '[') {
        depth++;
      } else if (--depth === 0) {
        return match.index + 1;
      }
    }
    return text.length;
  }
  // A number, true, false or null: up to the next delimiter.
  delimiter.lastIndex = start;
  return delimiter.exec(text)?.index ?? text.length;
}

/** The index after the closing quote of the string whose opening quote is at `start`. */
function stringEnd(text: string, start: number): number {
  quoteOrEscape.lastIndex = start + 1;
  for (let match = quoteOrEscape.exec(text); match; match = quoteOrEscape.exec(text)) {
    if (match[0] === '"') return match.index + 1;
    // An escape: the character after the backslash is not the string's end.
    quoteOrEscape.lastIndex = match.index + 2;
  }
  return text.length;
}
