// The configuration reference cannot drift from the code: docs/configuration.md
// is what `npm run docs:config` renders now; every environment variable the
// code reads (process.env, a Worker binding, a commander option's .env()) is
// declared in db/environment.ts, and every declaration is read; and the policy
// settings the operating guide lists are exactly those of wharf.setting.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { commandsOf, renderConfigurationReference, wranglerVars } from '../../cli/configuration-reference.js';
import { createProgram } from '../../cli/program.js';
import { environment } from '../../db/environment.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const read = (path: string) => readFile(join(root, path), 'utf8');

/** Where the product and its npm scripts' tools read their environment. */
const scanned = ['db', 'edge', 'operator', 'worker', 'recovery', 'server', 'cli', 'test/support/neon-http-stand-in.ts'];
/** The system's, not Wharf's: passed on to the processes Wharf starts, or searched. */
const system = new Set(['PATH', 'LANG', 'LC_ALL', 'TZ', 'TMPDIR', 'HOME']);

async function sourceFiles(path: string): Promise<string[]> {
  if (/\.(ts|tsx|js)$/.test(path)) return [path];
  const entries = await readdir(join(root, path), { withFileTypes: true });
  const nested = await Promise.all(entries.map((entry) => sourceFiles(join(path, entry.name))));
  return nested.flat().filter((file) => /\.(ts|tsx|js)$/.test(file));
}

interface Reads {
  /** Variable names read by a literal name: `process.env.X`, `env.X`, `.env('X')`. */
  names: Set<string>;
  /** Reads by a computed name built in place (a template literal), which the registry cannot see. */
  computed: string[];
}

/** The environment reads in `text` of `file`. */
function environmentReads(file: string, text: string): Reads {
  const names = new Set<string>();
  const patterns = [
    /\benv\.([A-Z][A-Z0-9_]*)\b/g,
    /\benv\[\s*['"]([A-Z][A-Z0-9_]*)['"]\s*\]/g,
    /\.env\(\s*['"]([A-Z][A-Z0-9_]*)['"]\s*\)/g,
  ];
  for (const pattern of patterns) for (const match of text.matchAll(pattern)) names.add(match[1]!);
  const computed = [...text.matchAll(/\benv\[\s*`[^`]*`\s*\]/g)].map((match) => `${file}: ${match[0]}`);
  return { names, computed };
}

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

it('docs/configuration.md is what `npm run docs:config` renders from the code now', async () => {
  const rendered = renderConfigurationReference({ program: createProgram(), wranglerToml: await read('wrangler.toml') });
  const committed = await read('docs/configuration.md');
  // On failure: run `npm run docs:config` and commit docs/configuration.md.
  expect(committed).toBe(rendered);
});

it('every variable the code reads is declared in db/environment.ts, and every declaration is read', async () => {
  const read_ = new Set<string>();
  const computed: string[] = [];
  const texts: string[] = [];
  for (const path of scanned) {
    for (const file of await sourceFiles(path)) {
      if (file === join('db', 'environment.ts')) continue;
      const text = await read(file);
      texts.push(text);
      const reads = environmentReads(file, text);
      for (const name of reads.names) read_.add(name);
      computed.push(...reads.computed);
    }
  }
  // The options of the `wharf` command and the vars of wrangler.toml are read too.
  for (const command of commandsOf(createProgram())) {
    for (const option of command.options) if (option.envVar) read_.add(option.envVar);
  }
  for (const vars of wranglerVars(await read('wrangler.toml')).values()) for (const name of vars.keys()) read_.add(name);

  const declared = Object.keys(environment);
  const fixed = declared.filter((name) => !name.includes('<APP>'));
  const perApp = declared.filter((name) => name.includes('<APP>'));
  // Per-app names are built by appVariable('GITHUB_APP_<APP>_…', app), never in place.
  expect(computed).toEqual([]);
  expect([...read_].filter((name) => !system.has(name) && !fixed.includes(name)).sort(), 'read but not declared').toEqual([]);
  expect(fixed.filter((name) => !read_.has(name)), 'declared but never read').toEqual([]);
  expect(perApp.filter((name) => !texts.some((text) => text.includes(`'${name}'`))), 'declared but never read').toEqual([]);
});

it('finds a variable read by name, by a commander option and by a name built in place', () => {
  const text = [
    "const a = process.env.WHARF_NEW_THING ?? 1;",
    "new Option('--x <y>', 'x').env('WHARF_OPTION')",
    "const b = env[`GITHUB_APP_${stem}_ID`];",
    "const c = options.env.HYPERDRIVE;",
  ].join('\n');
  const reads = environmentReads('x.ts', text);
  expect([...reads.names].sort()).toEqual(['HYPERDRIVE', 'WHARF_NEW_THING', 'WHARF_OPTION']);
  expect(reads.computed).toEqual(['x.ts: env[`GITHUB_APP_${stem}_ID`]']);
});

it('the policy settings of docs/operating.md are those of wharf.setting, with their defaults', async () => {
  const guide = await read('docs/operating.md');
  const table = /<!-- settings:begin -->([\s\S]*?)<!-- settings:end -->/.exec(guide)?.[1];
  expect(table, 'docs/operating.md has no table between <!-- settings:begin --> and <!-- settings:end -->').toBeDefined();
  const documented = [...table!.matchAll(/^\| `([a-z_]+)` \| ([^|]+?) \|/gm)].map((match) => [match[1]!, match[2]!.trim()]);
  const { rows } = await db.pool.query<{ key: string; value: string }>('SELECT key, value FROM wharf.setting ORDER BY key');
  expect(Object.fromEntries(documented)).toEqual(Object.fromEntries(rows.map((row) => [row.key, row.value])));
});
