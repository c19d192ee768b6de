// Splits a sql/ file into its statements with PostgreSQL's own parser
// (libpg-query), each with the comment lines above it, so that a migration
// can carry a changed function exactly as a DBA reads it in sql/.
import { parse } from 'libpg-query';

export interface SqlStatement {
  /** The sql/ file it comes from. */
  source: string;
  /** The statement without its leading comments, ending in `;`. */
  sql: string;
  /** The statement with the comment lines just above it, as written. */
  text: string;
}

export async function splitStatements(source: string, fileText: string): Promise<SqlStatement[]> {
  // Parser locations are byte offsets into the UTF-8 text.
  const bytes = Buffer.from(fileText, 'utf8');
  const { stmts } = await parse(fileText);
  const statements: SqlStatement[] = [];
  let previousEnd = 0;
  for (const stmt of stmts ?? []) {
    const start = stmt.stmt_location ?? 0;
    const end = stmt.stmt_len ? start + stmt.stmt_len : bytes.length;
    const sql = `${bytes.subarray(start, end).toString('utf8').trim().replace(/;$/, '')};`;
    // What lies between the previous statement and this one: its leading
    // comment, after the blank line that ends the comments of the one before.
    const between = bytes.subarray(previousEnd, start).toString('utf8').replace(/^\s*;/, '');
    const paragraphs = between.split(/\n\s*\n/);
    const lead = paragraphs[paragraphs.length - 1]!.trim();
    const leadingComment = lead.split('\n').every((line) => line.trim().startsWith('--')) ? lead : '';
    statements.push({ source, sql, text: leadingComment ? `${leadingComment}\n${sql}` : sql });
    previousEnd = end;
  }
  return statements;
}
