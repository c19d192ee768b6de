// The frozen migrations of migrations/ and their lock file: which release each
// shipped in and the SHA-256 of its bytes. A released migration never changes;
// the lock is how the tests (and `npm run sql:release`) notice when one did.
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { packageRoot } from './package-root.js';

export const migrationsDirectory = join(packageRoot, 'migrations/');
export const lockFile = `${migrationsDirectory}migrations.lock`;

/** A migration file name: a number (its order), a slug, `.sql`. */
const migrationFileName = /^(\d+)_[a-z0-9-]+\.sql$/;
/** For node-pg-migrate: every file of migrations/ that is not a migration. */
export const nonMigrationPattern = '(?!\\d+_[a-z0-9-]+\\.sql$).*';

export interface MigrationFile {
  /** The name node-pg-migrate records in pgmigrations: the file name without `.sql`. */
  name: string;
  file: string;
  text: string;
  sha256: string;
}

export interface LockEntry {
  release: string;
  sha256: string;
  file: string;
}

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Every migration of migrations/, in the order node-pg-migrate applies them. */
export async function readMigrationFiles(directory = migrationsDirectory): Promise<MigrationFile[]> {
  const files = (await readdir(directory))
    .filter((file) => migrationFileName.test(file))
    .sort((a, b) => Number(migrationFileName.exec(a)![1]) - Number(migrationFileName.exec(b)![1]));
  return Promise.all(
    files.map(async (file) => {
      const text = await readFile(`${directory}${file}`, 'utf8');
      return { name: file.replace(/\.sql$/, ''), file, text, sha256: sha256(text) };
    }),
  );
}

export function parseLock(text: string): LockEntry[] {
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const [release, hash, file, ...rest] = line.split(/\s+/);
      if (!release || !hash || !file || rest.length > 0 || !/^[0-9a-f]{64}$/.test(hash)) {
        throw new Error(`migrations.lock: cannot read the line "${line}"`);
      }
      return { release, sha256: hash, file };
    });
}

export async function readLock(path = lockFile): Promise<LockEntry[]> {
  return parseLock(await readFile(path, 'utf8'));
}

export function formatLock(entries: LockEntry[]): string {
  return [
    '# Released migrations: release, SHA-256 of the file, file. Written by',
    '# `npm run sql:release`; never edit a released migration (the tests compare',
    '# every file with its line here). See sql/README.md.',
    ...entries.map((entry) => `${entry.release}  ${entry.sha256}  ${entry.file}`),
    '',
  ].join('\n');
}

/** What is wrong between migrations/ and its lock, one sentence per file; [] when they agree. */
export function lockProblems(files: MigrationFile[], lock: LockEntry[]): string[] {
  const problems: string[] = [];
  const byFile = new Map(lock.map((entry) => [entry.file, entry]));
  for (const file of files) {
    const entry = byFile.get(file.file);
    if (!entry) {
      problems.push(`migrations/${file.file} is not released: write it with \`npm run sql:release\``);
    } else if (entry.sha256 !== file.sha256) {
      problems.push(
        `migrations/${file.file} was edited after its release ${entry.release}: ` +
          'a released migration never changes; restore it and ship the change as a new migration',
      );
    }
  }
  const present = new Set(files.map((file) => file.file));
  for (const entry of lock) {
    if (!present.has(entry.file)) problems.push(`migrations/${entry.file} (release ${entry.release}) is missing`);
  }
  const order = files.map((file) => file.file).filter((file) => byFile.has(file));
  const locked = lock.map((entry) => entry.file).filter((file) => present.has(file));
  if (order.join() !== locked.join()) problems.push('migrations.lock lists the migrations out of their order');
  return problems;
}

/** The up (or down) part of a plain-SQL migration, as node-pg-migrate splits it. */
export function migrationPart(text: string, direction: 'up' | 'down'): string {
  const down = text.search(/^\s*--[\s-]*down\s+migration/im);
  const up = text.search(/^\s*--[\s-]*up\s+migration/im);
  if (direction === 'up') return text.slice(Math.max(up, 0), down > up ? down : undefined);
  return down < 0 ? '' : text.slice(down, up > down ? up : undefined);
}
