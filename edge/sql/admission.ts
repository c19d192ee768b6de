// One call of wharf.admit (sql/80-admission.sql): the only write the edge makes.
import type { Database } from '../../db/database.js';

export type Provider = 'github' | 'gitlab' | 'slack' | 'outline' | 'forgejo' | 'generic';

export interface Admission {
  provider: Provider;
  source: string;
  deliveryKey: string;
  eventType: string;
  /** Routing facts from the signed body or the endpoint, never a header. */
  route: Record<string, unknown>;
  /** Most specific first. */
  subjects: string[];
  /** The verified body text, stored as jsonb as sent. */
  payloadText: string;
  headers: Record<string, string>;
  /** Hex SHA-256 of the raw body, for providers that sign the body alone. */
  bodySha256?: string;
}

export interface Receipt {
  delivery_key: string;
  events: { workspace_id: number | null; event_id: number; outcome: 'stored' | 'duplicate' }[];
  refused: { connection_id: number; workspace_id: number; reason: string }[];
  dropped: string | null;
}

export async function admit(database: Database, admission: Admission): Promise<Receipt> {
  const { rows } = await database.query<{ receipt: Receipt }>(
    'SELECT wharf.admit($1, $2, $3, $4, $5::jsonb, $6::text[], $7::jsonb, $8::jsonb, $9) AS receipt',
    [
      admission.provider,
      admission.source,
      admission.deliveryKey,
      admission.eventType,
      JSON.stringify(admission.route),
      admission.subjects,
      admission.payloadText,
      JSON.stringify(admission.headers),
      admission.bodySha256 ?? null,
    ],
  );
  return rows[0]!.receipt;
}
