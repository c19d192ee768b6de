// Wharf's side of every workload: one workspace with one GitHub App
// installation subscribed to `repo:acme/r<k>`, admissions through
// wharf.admit, and set-based backlogs for the drain workloads.
import type pg from 'pg';
import { makePayload, payloadTemplate } from '../payload.js';

export const githubSource = 'https://github.com';
export const installationRoute = { installation_id: '1' };

export function subjectOf(scope: number): string {
  return `repo:acme/r${scope}`;
}

/** Workspace 1, installation '1', subscribed to the first `scopes` subjects. Returns the connection id. */
export async function setupWharfInstallation(pool: pg.Pool, scopes: number): Promise<number> {
  await pool.query('SELECT wharf.upsert_workspace(1)');
  const { rows } = await pool.query<{ id: string }>(
    `SELECT wharf.upsert_connection(1, 'github', $1, 'app_installation', '1') AS id`,
    [githubSource],
  );
  const connectionId = Number(rows[0]?.id);
  await pool.query(
    `SELECT wharf.subscribe($1, 'repo:acme/r' || k) FROM generate_series(0, $2::int - 1) k`,
    [connectionId, scopes],
  );
  return connectionId;
}

/**
 * One signed-and-verified GitHub push, as the edge would pass it to admit
 * (with the headers it keeps, and the hex SHA-256 of the body it signed when
 * given: the edge sends it for GitHub, whose signature covers the body alone).
 */
export async function admitPush(
  client: pg.Pool | pg.PoolClient | pg.Client,
  deliveryKey: string,
  scope: number,
  seq: number,
  headers: Record<string, string> = {},
  bodySha256: string | null = null,
): Promise<void> {
  const subject = subjectOf(scope);
  await client.query(
    `SELECT wharf.admit('github', $1, $2, 'push', $3, $4, $5, $6, $7)`,
    [githubSource, deliveryKey, installationRoute, [subject], makePayload(subject, seq), headers, bodySha256],
  );
}

/**
 * Queues `events` rows over `scopes` scopes in one INSERT … SELECT, shaped as
 * admit stores them (the scope trigger keeps the heads), event g in scope
 * g mod scopes with seq g. Much faster than admitting them one by one, and the
 * drain workloads time only the drain.
 */
export async function loadWharfBacklog(
  pool: pg.Pool | pg.PoolClient,
  connectionId: number,
  events: number,
  scopes: number,
  firstSeq = 0,
  analyze = true,
): Promise<void> {
  const batch = 50_000;
  for (let start = firstSeq; start < firstSeq + events; start += batch) {
    const end = Math.min(start + batch, firstSeq + events) - 1;
    await pool.query(
      `INSERT INTO wharf.provider_event
         (workspace_id, provider, delivery_key, event_type, subject, scope_key, source, connection_id, payload)
       SELECT 1, 'github', 'load-' || g, 'push', s.subject, '1:github:' || s.subject, $1, $2,
              jsonb_set($3::jsonb, '{bench}', jsonb_build_object('key', s.subject, 'seq', g))
         FROM generate_series($4::bigint, $5::bigint) g,
              LATERAL (SELECT 'repo:acme/r' || (g % $6) AS subject) s
        ORDER BY g`,
      [githubSource, connectionId, payloadTemplate, start, end, scopes],
    );
  }
  if (analyze) await pool.query('ANALYZE wharf.provider_event, wharf.scope');
}

export interface RelationSize {
  relation: string;
  bytes: number;
}

/** Heap+TOAST of the inbox tables and each of their indexes. */
export async function wharfRelationSizes(pool: pg.Pool): Promise<RelationSize[]> {
  const { rows } = await pool.query<{ relation: string; bytes: string }>(`
    SELECT c.relname AS relation,
           CASE WHEN c.relkind = 'r' THEN pg_table_size(c.oid) ELSE pg_relation_size(c.oid) END AS bytes
      FROM pg_class c
     WHERE c.relnamespace = 'wharf'::regnamespace AND c.relkind IN ('r', 'i')
       AND (c.relname IN ('provider_event', 'scope')
            OR c.oid IN (SELECT indexrelid FROM pg_index
                          WHERE indrelid IN ('wharf.provider_event'::regclass, 'wharf.scope'::regclass)))
     ORDER BY c.relkind DESC, c.relname`);
  return rows.map((row) => ({ relation: row.relation, bytes: Number(row.bytes) }));
}
