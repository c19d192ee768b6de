import type { Database } from '../../database.js';
import { callWharf } from '../call.js';

/** wharf.subscribe / wharf.unsubscribe: true when something changed. */
export async function setSubscription(
  db: Database, connectionId: string, subject: string, subscribed: boolean,
): Promise<boolean> {
  const call = subscribed ? 'wharf.subscribe($1, $2)' : 'wharf.unsubscribe($1, $2)';
  return callWharf<boolean>(db, call, [connectionId, subject]);
}
