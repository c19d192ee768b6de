// Who a token stands for, and what a wrong one costs its sender: the one
// check behind both doors of the operator surface, the API's bearer tokens
// and the console's sign-in form and session cookie. One per server, shared
// by both doors (server/app.ts), so that a guesser has one budget for the
// two and the token table is loaded once.
//
// The token is looked up first: the admin token by a comparison in memory,
// a workspace token by its hash in the token table (token-table.ts) and
// then wharf.verify_token. A valid token is never counted, delayed or
// refused, whatever its client sent before. Only a refused token reaches
// the throttle (throttle.ts), which slows its client and then answers 429.
import type { Context } from 'hono';
import type { Database } from '../../db/database.js';
import type { Principal } from './auth.js';
import { clientAddress, type ClientKey } from './client-address.js';
import { verifyApiTokenHash } from '../sql/operator.js';
import { AuthThrottle, unknownClient, type AuthThrottleOptions } from './throttle.js';
import { TokenTable, type TokenTableOptions } from './token-table.js';
import { looksLikeWorkspaceToken, sameSecret, tokenHashHex } from './tokens.js';

export interface AuthenticatorOptions {
  /** Limits of the failed-authentication throttle (default: 10 failures per client and minute, the last 5 slowed). */
  throttle?: AuthThrottleOptions;
  /** The token table's reload budget. */
  tokenTable?: TokenTableOptions;
  /**
   * The client whose failures are counted together. Default: the address
   * the runtime tells (client-address.ts), through `trustedProxyHops`.
   */
  clientKey?: ClientKey;
  /** Reverse proxies in front of the server whose X-Forwarded-For entries are trusted (WHARF_TRUSTED_PROXY_HOPS); default 0. */
  trustedProxyHops?: number;
}

/** The admin token as the door accepts it (checkAdminToken), and the account its actions are recorded under. */
export interface AdminIdentity {
  token: string | undefined;
  account?: string;
}

export interface Authentication {
  /** Who the token stands for; undefined when it is not valid (401, once the throttle's delay is over). */
  principal: Principal | undefined;
  /** Set when the token is not valid and its client is past its failures: answer 429 with this Retry-After. */
  retryAfterSeconds?: number;
}

export class Authenticator {
  readonly throttle: AuthThrottle;
  readonly tokens: TokenTable;
  readonly clientKey: ClientKey;
  readonly #db: Database;

  constructor(db: Database, options: AuthenticatorOptions = {}) {
    this.#db = db;
    this.throttle = new AuthThrottle(options.throttle);
    this.tokens = new TokenTable(db, options.tokenTable);
    this.clientKey = options.clientKey
      ?? clientAddress(options.trustedProxyHops === undefined ? {} : { trustedProxyHops: options.trustedProxyHops });
  }

  /**
   * Who the token stands for, or the refusal its client has earned. Throws
   * (503) when the database cannot say; that counts as no failure.
   */
  async authenticate(c: Context, token: string, admin: AdminIdentity): Promise<Authentication> {
    const principal = await this.#identify(token, admin);
    if (principal) return { principal };
    const retryAfterSeconds = await this.throttle.refuse(this.clientKey(c) ?? unknownClient);
    return retryAfterSeconds === undefined ? { principal } : { principal, retryAfterSeconds };
  }

  /** The principal a token stands for (the admin token, or a live workspace token), or undefined. */
  async #identify(token: string, admin: AdminIdentity): Promise<Principal | undefined> {
    // An empty admin token (unset variable) must never let anyone in.
    if (admin.token && sameSecret(token, admin.token)) return { kind: 'admin', account: admin.account ?? 'admin' };
    // Anything that cannot be a workspace token costs no lookup at all.
    if (!looksLikeWorkspaceToken(token)) return undefined;
    const hash = tokenHashHex(token);
    if (!(await this.tokens.mayBeLive(hash))) return undefined;
    const found = await verifyApiTokenHash(this.#db, hash);
    if (!found) {
      this.tokens.forget(hash);
      return undefined;
    }
    return { kind: 'workspace', workspaceId: String(found.workspace_id), account: `token:${found.name}` };
  }
}
