// Runs one pgTAP file through a plain client and reads its TAP lines, so the
// suites need no psql or pg_prove, only the pgtap extension on the server.
import pg from 'pg';

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
