// What a log may say about a failure: the type of each error in the cause
// chain, its code, and where it was thrown (file:line of its stack frames).
// Never a message: messages carry payload fragments, URLs and credentials.
import { dirname, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { causeChain, errorClassName } from './causes.js';
import { errorCode } from '../db/error-codes.js';

export interface SanitizedCause {
  type: string;
  code?: string;
  frames: string[];
}

const maxFrames = 12;

export function sanitizeCauses(error: unknown): SanitizedCause[] {
  return causeChain(error).map((cause) => {
    const code = errorCode(cause);
    return {
      type: errorClassName(cause).slice(0, 128),
      ...(code !== undefined && /^[A-Za-z0-9_]{1,40}$/.test(code) ? { code } : {}),
      frames: cause instanceof Error ? stackFrames(cause.stack) : [],
    };
  });
}

// A V8 frame line ends in `(location)` or is `at location`, where location is
// path:line:column. The first stack line (name: message) is never read.
const frameLine = /^\s+at (?:.*?\()?(.+?):(\d+):\d+\)?$/;

function stackFrames(stack: string | undefined): string[] {
  if (!stack) return [];
  const frames: string[] = [];
  for (const line of stack.split('\n')) {
    const match = frameLine.exec(line);
    if (!match?.[1] || !match[2]) continue;
    frames.push(`${shortPath(match[1])}:${match[2]}`);
    if (frames.length >= maxFrames) break;
  }
  return frames;
}

function shortPath(location: string): string {
  let path = location;
  if (path.startsWith('file://')) {
    try {
      path = fileURLToPath(path);
    } catch {
      return 'unknown';
    }
  }
  if (path.startsWith('/')) path = relative(process.cwd(), path);
  // Paths only: anything that could carry query strings or credentials goes.
  return /^[\w./@:-]+$/.test(path) ? path : 'unknown';
}

// The library's own directories (worker/ and db/ beside this module, in the
// source tree or in dist/): its frames say nothing about where an application
// failed. Installed as a dependency, the library is under node_modules anyway.
const libraryRoot = dirname(dirname(fileURLToPath(import.meta.url)));
const libraryDirectories = ['worker', 'db'].map((name) => `${libraryRoot}${sep}${name}${sep}`);

const maxAppFrames = 8;

// A V8 frame line with its function (`at name (location)`) or without (`at
// location`); location is path:line:column.
const namedFrameLine = /^\s+at (?:(.+?) \()?(.+?):(\d+):(\d+)\)?$/;

/**
 * Where the error was thrown in the application's own code, innermost first,
 * for wharf.fail: at most 8 of `path:line:column function`, the path relative
 * to the working directory (the application's root), skipping node internals,
 * node_modules and this library. Only the error's own stack, never its first
 * line (the message); function names only as identifiers, so no argument or
 * text can pass.
 */
export function appFrames(error: unknown): string[] {
  if (!(error instanceof Error) || typeof error.stack !== 'string') return [];
  const frames: string[] = [];
  for (const line of error.stack.split('\n')) {
    const match = namedFrameLine.exec(line);
    if (!match?.[2] || !match[3] || !match[4]) continue;
    const location = absolutePath(match[2]);
    if (location === null || !isAppPath(location)) continue;
    const path = location.startsWith('/') ? relative(process.cwd(), location) : location;
    if (!/^[\w.@-][\w./@-]{0,199}$/.test(path) || match[3].length > 7 || match[4].length > 7) continue;
    const name = functionName(match[1]);
    frames.push(`${path}:${match[3]}:${match[4]}${name === null ? '' : ` ${name}`}`);
    if (frames.length >= maxAppFrames) break;
  }
  return frames;
}

function absolutePath(location: string): string | null {
  if (!location.startsWith('file://')) return location;
  try {
    return fileURLToPath(location);
  } catch {
    return null;
  }
}

function isAppPath(path: string): boolean {
  // node:internal/…, and the bare names of older nodes (internal/…, events.js).
  if (path.startsWith('node:') || !path.startsWith('/')) return false;
  if (path.includes(`${sep}node_modules${sep}`)) return false;
  return !libraryDirectories.some((directory) => path.startsWith(directory));
}

// `async name`, `new Name`, `Class.method [as alias]`: the name alone, or
// null when it is not an identifier path (an eval, a computed name).
function functionName(raw: string | undefined): string | null {
  if (raw === undefined) return null;
  const name = raw.replace(/^(?:async |new )+/, '').replace(/ \[as [^\]]*\]$/, '');
  return /^[A-Za-z_$<][\w$.<>]{0,127}$/.test(name) ? name : null;
}
