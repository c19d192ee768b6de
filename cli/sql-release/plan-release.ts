// Works out the next migration: the statements of sql/ that change a database
// migrated to the last release, and the statements that undo them.
import type pg from 'pg';
import { readSqlSources } from '../../db/sql-sources.js';
import { dropAllFunctions, dropSql, readCatalog, type CatalogObject } from './catalog.js';
import { splitStatements, type SqlStatement } from './split-statements.js';

export interface ReleasePlan {
  /** Objects new in sql/, changed, or gone from it, by catalog key. */
  added: string[];
  changed: string[];
  removed: string[];
  up: string;
  down: string;
  /** The catalog a database holds once the plan has run: sql/ exactly. */
  target: Map<string, CatalogObject>;
}

async function sqlStatements(): Promise<SqlStatement[]> {
  const statements: SqlStatement[] = [];
  for (const source of await readSqlSources()) statements.push(...(await splitStatements(source.name, source.text)));
  return statements;
}

/** Runs `work` in a transaction that is always rolled back. */
async function rolledBack<T>(client: pg.ClientBase, work: () => Promise<T>): Promise<T> {
  await client.query('BEGIN');
  try {
    return await work();
  } finally {
    await client.query('ROLLBACK');
  }
}

/** `client` is connected to a database migrated to the last release; it is left as it was. */
export async function planRelease(client: pg.ClientBase): Promise<ReleasePlan> {
  const statements = await sqlStatements();
  const released = await readCatalog(client);

  // What sql/ makes of it: every function again, from nothing.
  const target = await rolledBack(client, async () => {
    await client.query(dropAllFunctions);
    for (const statement of statements) await client.query(statement.sql);
    return readCatalog(client);
  });

  const added = [...target.keys()].filter((key) => !released.has(key));
  const removed = [...released.keys()].filter((key) => !target.has(key));
  const changed = [...target.keys()].filter(
    (key) => released.has(key) && released.get(key)!.definition !== target.get(key)!.definition,
  );
  // CREATE OR REPLACE keeps a function's oid, so it cannot change its
  // result or arguments: such a function is dropped and created again.
  const recreated = changed.filter(
    (key) => target.get(key)!.kind === 'function' && released.get(key)!.signature !== target.get(key)!.signature,
  );
  // Triggers first: a removed function cannot be dropped while a trigger runs it.
  const drops = [...removed, ...recreated].map((key) => released.get(key)!)
    .sort((a, b) => Number(b.kind === 'trigger') - Number(a.kind === 'trigger'));

  // Which statements write the objects that change: run them in order over
  // the released database and see whose catalog rows each one writes.
  const wanted = new Set([...added, ...changed]);
  const included = await rolledBack(client, async () => {
    for (const object of drops) await client.query(dropSql(object));
    const chosen: SqlStatement[] = [];
    let before = await readCatalog(client);
    for (const statement of statements) {
      await client.query(statement.sql);
      const after = await readCatalog(client);
      const touched = [...new Set([...before.keys(), ...after.keys()])].filter(
        (key) => before.get(key)?.version !== after.get(key)?.version,
      );
      if (touched.some((key) => wanted.has(key))) chosen.push(statement);
      before = after;
    }
    return chosen;
  });

  // DROP FUNCTION takes its grants with it: the roles that could execute a
  // dropped function may execute the functions of the same name this
  // migration creates (docs/sql.md, "Roles").
  const droppedFunctions = drops.filter((object) => object.kind === 'function');
  const regranted = droppedFunctions.length === 0 ? [] : [...new Set([...added, ...recreated])]
    .map((key) => target.get(key)!)
    .filter((object) => object.kind === 'function'
      && droppedFunctions.some((dropped) => functionName(dropped.identity) === functionName(object.identity)));
  const up: string[] = [];
  if (regranted.length > 0) {
    up.push([
      '-- The grants of the functions dropped below, given again to the functions of the same name created after them.',
      'CREATE TEMP TABLE wharf_release_grants ON COMMIT DROP AS',
      '  SELECT p.proname::text AS name, a.grantee::regrole::text AS grantee',
      '    FROM pg_proc p CROSS JOIN LATERAL aclexplode(p.proacl) a',
      `   WHERE p.oid IN (${droppedFunctions.map((object) => `'${object.identity}'::regprocedure`).join(', ')})`,
      "     AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner;",
    ].join('\n'));
  }
  up.push(...drops.map(dropSql));
  let source = '';
  for (const statement of included) {
    if (statement.source !== source) up.push(`-- ======== sql/${(source = statement.source)} ========`);
    up.push(statement.text);
  }
  if (regranted.length > 0) {
    up.push([
      'DO $$',
      'DECLARE g record;',
      'BEGIN',
      '  FOR g IN SELECT * FROM wharf_release_grants LOOP',
      ...regranted.map((object) =>
        `    IF g.name = '${functionName(object.identity)}' THEN EXECUTE format('GRANT EXECUTE ON FUNCTION ${object.identity} TO %s', g.grantee); END IF;`),
      '  END LOOP;',
      'END $$;',
    ].join('\n'));
  }

  // Down: drop what is new, then give back what changed or went its released text.
  // Every trigger goes first, new or changed (a changed trigger may run a
  // function this migration added), and the released triggers come back
  // last, once the functions they run are there again.
  const isTrigger = (key: string) => key.startsWith('trigger');
  const down: string[] = [
    // The released texts come back in catalog order, not in the order their
    // SQL-language bodies call each other: check those bodies when they run,
    // as pg_dump's restores do.
    'SET LOCAL check_function_bodies = off;',
    ...added.filter(isTrigger).map((key) => dropSql(target.get(key)!)),
    ...changed.filter(isTrigger).map((key) => `DROP TRIGGER IF EXISTS ${released.get(key)!.identity};`),
    ...added.filter((key) => !isTrigger(key)).map((key) => dropSql(target.get(key)!)),
    ...recreated.map((key) => dropSql(target.get(key)!)),
    ...[...changed, ...removed].filter((key) => !isTrigger(key)).map((key) => released.get(key)!.createSql),
    ...[...changed, ...removed].filter(isTrigger).map((key) => released.get(key)!.createSql),
  ];
  return { added, changed, removed, up: up.join('\n\n'), down: down.join('\n\n'), target };
}

/** `admit` of `wharf.admit(text,text)`: pg_proc's proname. */
function functionName(identity: string): string {
  return identity.slice(identity.indexOf('.') + 1, identity.indexOf('('));
}
