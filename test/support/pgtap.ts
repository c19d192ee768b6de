// Runs one pgTAP file through a plain client and reads its TAP lines, so the
// suites need no psql or pg_prove, only the pgtap extension on the server.
import { readdir, readFile } from 'node:fs/promises';
import pg from 'pg';

const suiteDirectory = new URL('../sql/', import.meta.url);

/** The pgTAP suites of test/sql/, one per sql/ file, by name. */
export async function pgtapSuites(): Promise<string[]> {
  return (await readdir(suiteDirectory)).filter((name) => name.endsWith('.sql')).sort();
}

export interface TapResult {
  planned: number | undefined;
  passed: string[];
  failed: string[];
  /** Every TAP line, diagnostics included, for a readable failure message. */
  lines: string[];
}

export async function pgtapAvailable(client: pg.Client): Promise<boolean> {
  const { rows } = await client.query(
    `SELECT 1 FROM pg_available_extensions WHERE name = 'pgtap'`,
  );
  return rows.length > 0;
}

export async function runPgtapFile(client: pg.Client, sql: string): Promise<TapResult> {
  const lines: string[] = [];
  // A simple query: the file may hold many statements. Each SELECT of a pgTAP
  // function returns TAP text in its single column.
  const results = await client.query(sql);
  for (const result of Array.isArray(results) ? results : [results]) {
    for (const row of result.rows as Record<string, unknown>[]) {
      for (const value of Object.values(row)) {
        if (typeof value === 'string') lines.push(...value.split('\n'));
      }
    }
  }
  const plan = lines.map((line) => /^1\.\.(\d+)$/.exec(line)).find(Boolean);
  return {
    planned: plan ? Number(plan[1]) : undefined,
    passed: lines.filter((line) => /^ok \d+/.test(line)),
    failed: lines.filter((line) => /^not ok \d+/.test(line)),
    lines,
  };
}

/**
 * Runs suite `name` of test/sql/ in the database of `client`, with the
 * session helpers every suite may use. pgTAP missing is a failure, never a
 * skip: CI must not pass without it.
 */
export async function runPgtapSuite(client: pg.Client, name: string): Promise<TapResult> {
  if (!(await pgtapAvailable(client))) {
    throw new Error(
      'pgTAP is not installed on the test PostgreSQL server. On Debian: ' +
        'apt-get install -y postgresql-15-pgtap (see docs/contributing.md, "The tests").',
    );
  }
  await client.query('CREATE EXTENSION IF NOT EXISTS pgtap');
  await client.query(await readFile(new URL('fixtures/inbox-rows.sql', suiteDirectory), 'utf8'));
  return runPgtapFile(client, await readFile(new URL(name, suiteDirectory), 'utf8'));
}

/** Vitest's view of a TAP result: every planned assertion ran and passed. */
export function tapFailures(result: TapResult): string | undefined {
  const complete = result.failed.length === 0 && result.planned !== undefined && result.planned > 0
    && result.passed.length === result.planned;
  return complete ? undefined : result.lines.join('\n');
}
