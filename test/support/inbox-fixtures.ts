// The one way tests build an inbox through the SQL API: workspace →
// connection → subscriptions (buildConnection), then deliveries admitted
// through wharf.admit (admitDelivery), the only way rows enter the inbox.
// The suites' own helpers (worker-inbox.ts, api-fixtures.ts, console-rig.ts,
// edge-fixtures.ts) are thin defaults over these two.
import type pg from 'pg';

/** A pool or a client: anything that runs one statement. */
export type Db = Pick<pg.Pool | pg.Client | pg.PoolClient, 'query'>;

export interface ConnectionSpec {
  workspace: number | string;
  provider: string;
  source: string;
  /** Default 'webhook'. */
  kind?: string;
  externalId?: string | null;
  route?: object;
  subjects?: string[];
  /** Stored with wharf.set_connection_secret as given: encrypted by the caller where the provider needs it. */
  storedSecret?: string;
}

/** Makes (or finds) the workspace and the connection, subscribes it to `subjects`; the connection's id. */
export async function buildConnection(db: Db, spec: ConnectionSpec): Promise<number> {
  await db.query('SELECT wharf.upsert_workspace($1)', [spec.workspace]);
  const { rows } = await db.query<{ id: string }>(
    'SELECT wharf.upsert_connection($1, $2, $3, $4, $5, $6::jsonb) AS id',
    [spec.workspace, spec.provider, spec.source, spec.kind ?? 'webhook', spec.externalId ?? null, JSON.stringify(spec.route ?? {})],
  );
  const id = Number(rows[0]!.id);
  await subscribe(db, id, spec.subjects ?? []);
  if (spec.storedSecret !== undefined) await db.query('SELECT wharf.set_connection_secret($1, $2)', [id, spec.storedSecret]);
  return id;
}

export async function subscribe(db: Db, connectionId: number | string, subjects: string[]): Promise<void> {
  for (const subject of subjects) await db.query('SELECT wharf.subscribe($1, $2)', [connectionId, subject]);
}

export interface DeliverySpec {
  provider: string;
  source: string;
  deliveryKey: string;
  eventType: string;
  route: object;
  subjects: string[] | null;
  payload?: unknown;
  headers?: Record<string, string>;
  /** Tries a delivery told WH409 (the route changed during admission) again, up to 5 times, as the edge's provider would. */
  retryRouteChanged?: boolean;
}

export interface Admitted {
  /** The first event the receipt names. */
  id: string;
  outcome: string;
}

/** Admits one delivery through wharf.admit; its receipt's first event. Throws when the receipt names none. */
export async function admitDelivery(db: Db, delivery: DeliverySpec): Promise<Admitted> {
  const params = [delivery.provider, delivery.source, delivery.deliveryKey, delivery.eventType, delivery.route,
    delivery.subjects, JSON.stringify(delivery.payload ?? {}), delivery.headers ?? {}];
  type Receipt = { receipt: { events: { event_id: number; outcome: string }[] } };
  let rows: Receipt[] = [];
  for (let attempt = 1; ; attempt += 1) {
    try {
      ({ rows } = await db.query<Receipt>('SELECT wharf.admit($1, $2, $3, $4, $5, $6, $7, $8) AS receipt', params));
      break;
    } catch (error) {
      if (!delivery.retryRouteChanged || (error as { code?: string }).code !== 'WH409' || attempt === 5) throw error;
    }
  }
  const event = rows[0]?.receipt.events[0];
  if (!event) throw new Error(`fixture: admission stored nothing: ${JSON.stringify(rows[0]?.receipt)}`);
  return { id: String(event.event_id), outcome: event.outcome };
}
