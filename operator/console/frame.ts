// The parts of a page frame every signed-in handler has at hand.
import type { Context } from 'hono';
import type { ConsoleEnv } from './env.js';
import type { PageFrame, Section } from './layout.js';
import type { Scope } from './scope.js';

export function frameOf(c: Context<ConsoleEnv>, basePath: string, scope?: Scope, section?: Section): PageFrame {
  return {
    basePath,
    principal: c.get('principal'),
    csrfToken: c.get('csrfToken'),
    nonce: c.get('secureHeadersNonce'),
    ...(scope ? { scope } : {}),
    ...(section ? { section } : {}),
  };
}
