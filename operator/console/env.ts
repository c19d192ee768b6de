// What every console handler knows about the request: who signed in, the
// token that says so (the cookie's), its CSRF token, and the CSP nonce.
import type { Principal } from '../api/auth.js';
import type { Authenticator } from '../api/authenticator.js';
import type { Database } from '../../db/database.js';
import type { KeyRing } from '../../db/secret-box.js';

export interface ConsoleVariables {
  principal: Principal;
  /** The hidden form field every POST of this session must carry. */
  csrfToken: string;
  /** Set by secureHeaders: the nonce the page's one inline script carries. */
  secureHeadersNonce?: string;
}

export type ConsoleEnv = { Variables: ConsoleVariables };

export interface ConsoleDeps {
  db: Database;
  /** WHARF_ADMIN_TOKEN as the API accepts it (checkAdminToken); without it only workspace tokens sign in. */
  adminToken?: string;
  /** Where the console is mounted; links and the cookie's Path use it. Default /console. */
  basePath?: string;
  /** Told about every 500 and every failed background bulk replay. */
  onUnexpectedError?: (error: unknown) => void;
  /**
   * Checks tokens and throttles failed sign-ins (authenticator.ts); a server
   * passes the one its API uses. By default the console has its own.
   */
  authenticator?: Authenticator;
  /**
   * WHARF_SECRET_KEYS, which seals a destination's signing secret and
   * credentials; without it those forms answer that it must be set.
   */
  keyRing?: Promise<KeyRing | undefined>;
}

/** What every page registration needs. */
export interface RouteDeps {
  db: Database;
  basePath: string;
  onUnexpectedError: (error: unknown) => void;
  keyRing?: Promise<KeyRing | undefined>;
}
