// The call of sql/75-connection-secrets.sql the edge makes: a connection's
// endpoint and its stored secrets, as the database holds them.
import type { Database } from '../../db/database.js';

export interface StoredEndpoint {
  connectionId: number;
  provider: string;
  source: string;
  route: Record<string, unknown>;
  /** GitLab: hex SHA-256 of the token, current then previous (while its overlap lasts). */
  tokenSha256s: string[];
  /** Outline, Forgejo/Gitea, generic: the encrypted HMAC keys, current then previous. */
  storedSigningKeys: string[];
}

interface Row {
  provider: string;
  source: string;
  route: Record<string, unknown>;
  token_sha256: string | null;
  signing_key: string | null;
  previous_token_sha256: string | null;
  previous_signing_key: string | null;
}

const present = (values: (string | null)[]): string[] => values.filter((value): value is string => value !== null);

/** undefined: no such connection (wharf.connection_endpoint). */
export async function readConnectionEndpoint(database: Database, connectionId: number): Promise<StoredEndpoint | undefined> {
  const { rows } = await database.query<Row>(
    `SELECT provider, source, route, token_sha256, signing_key, previous_token_sha256, previous_signing_key
       FROM wharf.connection_endpoint($1)`,
    [connectionId],
  );
  const row = rows[0];
  if (!row) return undefined;
  return {
    connectionId,
    provider: row.provider,
    source: row.source,
    route: row.route,
    tokenSha256s: present([row.token_sha256, row.previous_token_sha256]),
    storedSigningKeys: present([row.signing_key, row.previous_signing_key]),
  };
}
