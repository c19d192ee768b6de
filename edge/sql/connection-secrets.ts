// One call of wharf.connection_endpoint (sql/75-connection-secrets.sql).
import type { Database } from '../../db/database.js';

export interface ConnectionEndpoint {
  connectionId: number;
  provider: string;
  source: string;
  route: Record<string, unknown>;
  /** GitLab: hex SHA-256 of the token. */
  tokenSha256: string | null;
  /** Outline, Forgejo/Gitea, generic: the HMAC key. */
  signingKey: string | null;
}

interface Row {
  provider: string;
  source: string;
  route: Record<string, unknown>;
  token_sha256: string | null;
  signing_key: string | null;
}

/** undefined: no such connection. */
export async function readConnectionEndpoint(
  database: Database,
  connectionId: number,
): Promise<ConnectionEndpoint | undefined> {
  const { rows } = await database.query<Row>(
    'SELECT provider, source, route, token_sha256, signing_key FROM wharf.connection_endpoint($1)',
    [connectionId],
  );
  const row = rows[0];
  if (!row) return undefined;
  return {
    connectionId,
    provider: row.provider,
    source: row.source,
    route: row.route,
    tokenSha256: row.token_sha256,
    signingKey: row.signing_key,
  };
}
