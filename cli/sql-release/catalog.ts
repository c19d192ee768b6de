// What a release changes is read from PostgreSQL's catalog, not from text:
// every function and trigger of schema wharf with its definition as the
// server prints it, and the row version that tells which statement wrote it.
import type pg from 'pg';

export interface CatalogObject {
  /** `function wharf.claim(text,integer)` or `trigger name on wharf.table`. */
  key: string;
  kind: 'function' | 'trigger';
  /** What DROP FUNCTION / DROP TRIGGER takes. */
  identity: string;
  /** Definition, privileges and comment: two objects are the same release when these are equal. */
  definition: string;
  /** Result and arguments: CREATE OR REPLACE cannot change these, DROP must come first. */
  signature: string;
  /** The statements that create the object as it is (for a down migration). */
  createSql: string;
  /** Changes whenever a statement writes the object's catalog rows, even with the same text. */
  version: string;
}

const catalogQuery = `
  SELECT 'function ' || p.oid::regprocedure AS key, 'function' AS kind,
         p.oid::regprocedure::text AS identity,
         pg_get_functiondef(p.oid) AS body,
         pg_get_function_result(p.oid) || ' <- (' || pg_get_function_arguments(p.oid) || ')' AS signature,
         CASE WHEN p.proacl IS NULL THEN format('GRANT EXECUTE ON FUNCTION %s TO PUBLIC;', p.oid::regprocedure)
              ELSE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC;', p.oid::regprocedure) ||
                   coalesce((SELECT string_agg(format(E'\\nGRANT %s ON FUNCTION %s TO %s;', a.privilege_type,
                                     p.oid::regprocedure,
                                     CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END),
                                     '' ORDER BY a.grantee)
                               FROM aclexplode(p.proacl) a WHERE a.grantee <> p.proowner), '') END AS privileges,
         CASE WHEN obj_description(p.oid, 'pg_proc') IS NOT NULL
              THEN format('COMMENT ON FUNCTION %s IS %L;', p.oid::regprocedure, obj_description(p.oid, 'pg_proc')) END AS comment,
         p.ctid::text || ' ' || coalesce((SELECT d.ctid::text FROM pg_description d
                                           WHERE d.objoid = p.oid AND d.classoid = 'pg_proc'::regclass
                                             AND d.objsubid = 0), '') AS version
    FROM pg_proc p
   WHERE p.pronamespace = 'wharf'::regnamespace
  UNION ALL
  SELECT 'trigger ' || t.tgname || ' on ' || t.tgrelid::regclass, 'trigger',
         format('%I ON %s', t.tgname, t.tgrelid::regclass),
         pg_get_triggerdef(t.oid), '', '', NULL, t.ctid::text
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
   WHERE c.relnamespace = 'wharf'::regnamespace AND NOT t.tgisinternal
   ORDER BY 1`;

interface CatalogRow {
  key: string;
  kind: 'function' | 'trigger';
  identity: string;
  body: string;
  signature: string;
  privileges: string;
  comment: string | null;
  version: string;
}

export async function readCatalog(client: pg.ClientBase): Promise<Map<string, CatalogObject>> {
  const { rows } = await client.query<CatalogRow>(catalogQuery);
  return new Map(
    rows.map((row) => {
      const create = `${row.body.trim()};`;
      const createSql = [create, row.privileges, row.comment].filter((part) => part).join('\n');
      return [row.key, {
        key: row.key,
        kind: row.kind,
        identity: row.identity,
        definition: [create, row.privileges, row.comment ?? ''].join('\n'),
        signature: row.signature,
        createSql,
        version: row.version,
      }];
    }),
  );
}

/** Drops every function of schema wharf, and with them their triggers. */
export const dropAllFunctions = `
  DO $$
  DECLARE f regprocedure;
  BEGIN
    FOR f IN SELECT oid::regprocedure FROM pg_proc WHERE pronamespace = 'wharf'::regnamespace LOOP
      EXECUTE format('DROP FUNCTION %s CASCADE', f);
    END LOOP;
  END $$`;

export function dropSql(object: CatalogObject): string {
  return object.kind === 'function' ? `DROP FUNCTION ${object.identity};` : `DROP TRIGGER ${object.identity};`;
}
