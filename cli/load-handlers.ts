// Loads the handler map of `wharf worker --handlers <module>`: its named
// export `handlers`, else its default export.
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { HandlerMap } from '../worker/handlers.js';

export async function loadHandlers(modulePath: string): Promise<HandlerMap> {
  const module = (await import(pathToFileURL(resolve(modulePath)).href)) as { handlers?: unknown; default?: unknown };
  const handlers = module.handlers ?? module.default;
  if (typeof handlers !== 'object' || handlers === null) {
    throw new Error(`${modulePath} exports no handler map (export const handlers = { 'github:push': ... })`);
  }
  for (const [key, handler] of Object.entries(handlers)) {
    if (!/^[a-z]+:(\*|[^\s:]+)$/.test(key) || typeof handler !== 'function') {
      throw new Error(`${modulePath}: handler ${JSON.stringify(key)} must be a function keyed provider:event_type or provider:*`);
    }
  }
  return handlers as HandlerMap;
}
