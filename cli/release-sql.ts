// `npm run sql:release -- <name>`: writes the next frozen migration from the
// difference between sql/ and the last release, checks that it brings a new
// database to exactly sql/, locks it (migrations/migrations.lock) and
// rewrites the schema snapshot. sql/README.md says how a DBA reviews one.
//
// Table changes are written by hand as a migration of their own first; this
// script migrates over them, locks them with the release and puts the
// function changes in the migration after them.
import { readFile, unlink, writeFile } from 'node:fs/promises';
import { formatLock, lockFile, lockProblems, migrationsDirectory, readLock, readMigrationFiles } from '../db/migration-files.js';
import { startPostgresServer } from './postgres-server.js';
import { createScratchDatabase } from './scratch-database.js';
import { readCatalog } from './sql-release/catalog.js';
import { planRelease } from './sql-release/plan-release.js';
import { schemaSnapshot, schemaSnapshotFile } from './sql-release/schema-snapshot.js';

function usage(message: string): never {
  process.stderr.write(`${message}\nusage: npm run sql:release -- <name> [--release <version>]\n`);
  process.exit(2);
}

const [name, ...rest] = process.argv.slice(2);
if (!name || !/^[a-z0-9]+(-[a-z0-9]+)*$/.test(name)) usage('name the migration in lower-case words joined by -');
const packageVersion = (JSON.parse(await readFile(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
const release = rest[0] === '--release' && rest[1] ? rest[1] : packageVersion;

const files = await readMigrationFiles();
const lock = await readLock();
const edited = lockProblems(files, lock).filter((problem) => !problem.includes('is not released'));
if (edited.length > 0) usage(edited.join('\n'));
const lastRelease = lock.at(-1)?.release ?? '0.0.0';
if (release.localeCompare(lastRelease, undefined, { numeric: true }) < 0) {
  usage(`release ${release} is older than the last one, ${lastRelease}: bump package.json's version`);
}

const server = await startPostgresServer();
const released = await createScratchDatabase(server.url, { prefix: 'wharf_release' });
let written: string | undefined;
try {
  const client = await released.connect();
  const plan = await planRelease(client);
  const unlocked = files.filter((file) => !lock.some((entry) => entry.file === file.file));
  if (plan.up === '' && unlocked.length === 0) {
    process.stdout.write('sql/ is what the last release holds: nothing to release.\n');
  } else {
    if (plan.up !== '') {
      const number = Number(/^(\d+)/.exec(files.at(-1)!.file)![1]) + 1;
      written = `${number}_${name}.sql`;
      const summary = [
        ...plan.added.map((key) => `--   new      ${key}`),
        ...plan.changed.map((key) => `--   changed  ${key}`),
        ...plan.removed.map((key) => `--   dropped  ${key}`),
      ];
      await writeFile(`${migrationsDirectory}${written}`, [
        '-- Up Migration',
        '',
        `-- Release ${release}, written by \`npm run sql:release\` from the difference`,
        '-- between sql/ and the migrations before it. Frozen: never edit it.',
        ...summary,
        '',
        plan.up,
        '',
        '-- Down Migration',
        '',
        '-- The released text of everything the up changed.',
        '',
        plan.down,
        '',
      ].join('\n'));
    }

    // Proof: a new database migrated through the new files holds sql/ exactly.
    const fresh = await createScratchDatabase(server.url, { prefix: 'wharf_release_check' });
    try {
      const migrated = await readCatalog(await fresh.connect());
      const differs = [...new Set([...migrated.keys(), ...plan.target.keys()])]
        .filter((key) => migrated.get(key)?.definition !== plan.target.get(key)?.definition);
      if (differs.length > 0) throw new Error(`the migrations do not reproduce sql/ for: ${differs.join(', ')}`);
      await writeFile(schemaSnapshotFile, await schemaSnapshot(fresh.url));
    } finally {
      await fresh.drop();
    }

    const newFiles = await readMigrationFiles();
    const newEntries = newFiles
      .filter((file) => !lock.some((entry) => entry.file === file.file))
      .map((file) => ({ release, sha256: file.sha256, file: file.file }));
    await writeFile(lockFile, formatLock([...lock, ...newEntries]));
    for (const entry of newEntries) process.stdout.write(`released migrations/${entry.file} in ${release}\n`);
    written = undefined;
  }
} finally {
  if (written) await unlink(`${migrationsDirectory}${written}`);
  await released.drop();
  await server.stop();
}
