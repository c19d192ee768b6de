// One Hono app from the parts: the edge's /hooks, and the operator API at
// /api and its web console at /console where the process serves operators.
// Runtime-neutral; server/node.ts and server/cloudflare-worker.ts give it its
// database and environment.
import type { Hono } from 'hono';
import { createEdgeApp, type EdgeAppOptions } from '../edge/app.js';
import type { Database } from '../db/database.js';
import { parseKeyRing, type KeyRing } from '../db/secret-box.js';
import { operatorApi } from '../operator/api/app.js';
import { Authenticator } from '../operator/api/authenticator.js';
import { readTrustedProxyHops } from '../operator/api/client-address.js';
import { consoleApp } from '../operator/console/app.js';

export interface ServerAppOptions extends EdgeAppOptions {
  /**
   * Serve the operator API at /api and the console at /console, on this
   * database (the operator's role), with WHARF_ADMIN_TOKEN from the
   * environment, and WHARF_TRUSTED_PROXY_HOPS: how many reverse proxies
   * stand in front of this server, whose X-Forwarded-For entries name the
   * client whose failed sign-ins are counted (default 0: none, the socket's
   * address is the client). Without it the app is the public edge: /hooks only.
   */
  operator?: { database: Database };
}

export function createServerApp(options: ServerAppOptions): Hono {
  const app = createEdgeApp(options);
  if (options.operator) {
    const adminTokenText = options.env.WHARF_ADMIN_TOKEN;
    const adminToken = typeof adminTokenText === 'string' && adminTokenText !== '' ? adminTokenText : undefined;
    // One for both doors: a guesser has one budget, and the token table is loaded once.
    const authenticator = new Authenticator(options.operator.database, {
      trustedProxyHops: trustedProxyHops(options.env.WHARF_TRUSTED_PROXY_HOPS, options.logger),
      tokenTable: {
        onUnreadable: () => options.logger.warn({ event: 'token_table_unreadable' },
          'the operator role may not call wharf.live_token_hashes(): every wrong workspace token costs a database lookup '
          + 'until it may (README, "Roles")'),
      },
    });
    // One ring for both doors: the API and the console seal destinations' secrets alike.
    const keyRing = keyRingOrNone(options.env.WHARF_SECRET_KEYS, options.logger);
    app.route('/api', operatorApi({
      db: options.operator.database,
      adminToken,
      authenticator,
      keyRing,
      onUnexpectedError: (error) =>
        options.logger.error({ event: 'api_error', error: error instanceof Error ? error.name : typeof error }, 'operator API error'),
    }));
    app.route('/console', consoleApp({
      db: options.operator.database,
      adminToken,
      authenticator,
      keyRing,
      onUnexpectedError: (error) =>
        options.logger.error({ event: 'console_error', error: error instanceof Error ? error.name : typeof error }, 'operator console error'),
    }));
  }
  return app;
}

/** A malformed setting is logged once and trusts no forwarded header, never a crash. */
function trustedProxyHops(text: unknown, logger: ServerAppOptions['logger']): number {
  const { hops, problem } = readTrustedProxyHops(text);
  if (problem) logger.error({ event: 'trusted_proxy_hops_invalid' }, problem);
  return hops;
}

/** A malformed key ring is logged once and leaves the API without one (rotations then say so), never a crash. */
function keyRingOrNone(text: unknown, logger: ServerAppOptions['logger']): Promise<KeyRing | undefined> {
  return parseKeyRing(text).catch((error: unknown) => {
    logger.error({ event: 'secret_keys_unreadable', error: error instanceof Error ? error.message : 'unreadable' }, 'WHARF_SECRET_KEYS');
    return undefined;
  });
}
