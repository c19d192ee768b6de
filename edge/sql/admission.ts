// The edge's only writes: one call of wharf.admit per delivery, or of
// wharf.admit_many per batch of deliveries (sql/80-admission.sql).
import type { Database } from '../../db/database.js';
import type { Provider } from '../../db/providers.js';

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

/** What admit_many says in the slot of an element that admit would have rejected: its SQLSTATE and message. */
export interface ElementError {
  error: { code: string; message: string };
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

/**
 * One call of wharf.admit_many: the receipts in the order of `admissions`,
 * each admit's receipt or the element's own error. One transaction: it
 * rejects as a whole when the call fails (connection lost, the array's
 * document unparsable, WH409 of the transaction).
 *
 * Each payloadText must be one JSON value, as parseJsonBody (edge/request-body.ts)
 * returns it: it is spliced into the document as it is, so that a body is not
 * parsed and serialized again on its way.
 */
export async function admitMany(database: Database, admissions: readonly Admission[]): Promise<(Receipt | ElementError)[]> {
  const { rows } = await database.query<{ receipts: (Receipt | ElementError)[] }>(
    'SELECT wharf.admit_many($1::jsonb) AS receipts',
    [`[${admissions.map(deliveryDocument).join(',')}]`],
  );
  return rows[0]!.receipts;
}

/** One element of admit_many's argument: admit's arguments by name. */
function deliveryDocument(admission: Admission): string {
  return `{"provider":${JSON.stringify(admission.provider)},"source":${JSON.stringify(admission.source)},` +
    `"delivery_key":${JSON.stringify(admission.deliveryKey)},"event_type":${JSON.stringify(admission.eventType)},` +
    `"route":${JSON.stringify(admission.route)},"subjects":${JSON.stringify(admission.subjects)},` +
    `"headers":${JSON.stringify(admission.headers)},"body_sha256":${JSON.stringify(admission.bodySha256 ?? null)},` +
    `"payload":${admission.payloadText}}`;
}
