// The parts meet only in SQL and in db/: edge/, operator/ and worker/ never
// import each other, and nothing of theirs (nor db/) imports the entry points
// in server/ or the command in cli/, which compose them.
import { readdir, readFile } from 'node:fs/promises';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const root = fileURLToPath(new URL('../', import.meta.url));
const parts = ['db', 'edge', 'operator', 'worker', 'recovery', 'server', 'cli'] as const;
type Part = (typeof parts)[number];

/** What each part may import besides itself and packages. */
const allowed: Record<Part, Part[]> = {
  db: [],
  edge: ['db'],
  operator: ['db'],
  worker: ['db'],
  recovery: ['db'],
  server: ['db', 'edge', 'operator'],
  cli: ['db', 'edge', 'operator', 'worker', 'recovery', 'server'],
};

async function sourceFiles(directory: string): Promise<string[]> {
  const entries = await readdir(join(root, directory), { withFileTypes: true });
  const files = await Promise.all(entries.map((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return Promise.resolve(/\.(ts|tsx|js)$/.test(entry.name) ? [path] : []);
  }));
  return files.flat();
}

/** Every relative import in `text` of `file`, as a path from the repository root. */
function relativeImports(file: string, text: string): string[] {
  const specifiers = [...text.matchAll(/(?:from\s+|import\s*\(\s*|import\s+)['"](\.{1,2}\/[^'"]+)['"]/g)].map((m) => m[1]!);
  return specifiers.map((specifier) => normalize(join(dirname(file), specifier)));
}

/** The imports of `file` (of part `part`) that cross a boundary. */
function violations(part: Part, file: string, text: string): string[] {
  return relativeImports(file, text)
    .filter((target) => {
      const targetPart = target.split('/')[0]!;
      return targetPart !== part && !(allowed[part] as string[]).includes(targetPart);
    })
    .map((target) => `${file} imports ${target}`);
}

it('edge/, operator/ and worker/ import only db/ and themselves; nothing imports cli/; only cli/ imports server/', async () => {
  const found: string[] = [];
  for (const part of parts) {
    for (const file of await sourceFiles(part)) found.push(...violations(part, file, await readFile(join(root, file), 'utf8')));
  }
  expect(found).toEqual([]);
});

it('names the file and the import that crosses a boundary', () => {
  const text = "import { createWorker } from '../worker/index.js';\nimport type { Database } from '../db/database.js';";
  expect(violations('edge', 'edge/app.ts', text)).toEqual(['edge/app.ts imports worker/index.js']);
  expect(violations('worker', 'worker/sql/x.ts', "import { startServer } from '../../server/node.js';"))
    .toEqual(['worker/sql/x.ts imports server/node.js']);
});
