// Loads the handler map of `wharf worker --handlers <module>`: its named
// export `handlers`, else its default export.
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { HandlerMap } from '../worker/handlers.js';

/**
 * A TypeScript module needs tsx (Node 20 cannot load .ts): it is registered
 * when the host application has it, else the error says what to do.
 */
async function importModule(modulePath: string): Promise<{ handlers?: unknown; default?: unknown }> {
  const url = pathToFileURL(resolve(modulePath)).href;
  if (/\.[cm]?tsx?$/.test(modulePath)) {
    try {
      const { register } = await import('tsx/esm/api');
      register();
    } catch {
      throw new Error(`${modulePath} is TypeScript: npm install tsx, or compile it and pass the .js file`);
    }
  }
  return (await import(url)) as { handlers?: unknown; default?: unknown };
}

export async function loadHandlers(modulePath: string): Promise<HandlerMap> {
  const module = await importModule(modulePath);
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
