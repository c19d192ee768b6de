// The call of sql/75-connection-secrets.sql an operator makes: setting or
// rotating a connection's webhook secret.
import type { Database } from '../../db/database.js';
import { ApiError } from '../api/errors.js';
import { generateWebhookSecret } from '../api/tokens.js';
import { callWharf } from './call-wharf.js';
import { showConnection } from './operator.js';

/**
 * Sets a connection's webhook secret (wharf.set_connection_secret), a new
 * random one unless given, and returns it: the only time it is shown.
 * 400 (22023) for GitHub and Slack, whose secrets belong to the app.
 */
export async function rotateConnectionSecret(db: Database, id: string, secret?: string): Promise<string> {
  const connection = await showConnection(db, id);
  if (!connection) throw new ApiError(404, 'not_found', `unknown connection ${id}`);
  const next = secret ?? generateWebhookSecret(connection.provider);
  await callWharf(db, 'wharf.set_connection_secret($1, $2)', [id, next]);
  return next;
}
