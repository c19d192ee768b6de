// What a log may say about a failure: the type of each error in the cause
// chain, its code, and where it was thrown (file:line of its stack frames).
// Never a message: messages carry payload fragments, URLs and credentials.
import { relative } from 'node:path';
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
