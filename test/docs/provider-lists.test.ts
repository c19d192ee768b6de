// Every list of providers in the docs and the CLI's help is held to the
// registry (db/providers.ts) and to each adapter's declared timestamp, so that
// a provider added there cannot be left out of one: each test fails naming
// the providers its list misses (joined, so that none is elided). The lists
// the code makes from the registry (WHARF_SECRET_KEYS's description,
// `--kind`'s help) are checked where a reader meets them; the OpenAPI
// document's in test/operator/api-openapi.test.ts.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { createProgram } from '../../cli/program.js';
import { providerNames, providers, providersWithSecretIn, type Provider } from '../../db/providers.js';
import { adapters } from '../../edge/adapters/index.js';
import type { SignedTimestamp } from '../../edge/adapters/adapter.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const read = (path: string) => readFile(join(root, path), 'utf8');

/** The line of `page`'s text that starts with `start` (a table row). */
function lineStarting(text: string, start: string, page: string): string {
  const line = text.split('\n').find((candidate) => candidate.startsWith(start));
  expect(line, `${page} has no line starting ${JSON.stringify(start)}`).toBeDefined();
  return line!;
}

/** The section of `text` under the heading `heading`, up to the next heading of its level. */
function section(text: string, heading: string, page: string): string {
  const start = text.indexOf(`\n${heading}\n`);
  expect(start, `${page} has no ${JSON.stringify(heading)}`).toBeGreaterThanOrEqual(0);
  const end = text.indexOf(`\n${heading.split(' ')[0]} `, start + 1);
  return text.slice(start, end < 0 ? undefined : end);
}

const title = (name: Provider): string => providers[name].title;

/** How a tolerance is written: `5 minutes`, `60 seconds`. */
function tolerance(ms: number): string {
  return ms > 60_000 && ms % 60_000 === 0 ? `${ms / 60_000} minutes` : `${ms / 1000} seconds`;
}

/** How a provider's signed timestamp is written in the list: `Zoom (`x-zm-request-timestamp`, seconds)`. */
function timestampItem(name: Provider, timestamp: SignedTimestamp): string {
  return `${title(name)} (\`${timestamp.in}\`, ${timestamp.unit})`;
}

it('the unknown-route row of docs/troubleshooting.md names every route', async () => {
  const row = lineStarting(await read('docs/troubleshooting.md'), '| 404 | `unknown-route` |', 'docs/troubleshooting.md');
  expect(providerNames.filter((name) => !row.includes(`\`${name}\``)).join(', '), 'the routes it does not name').toBe('');
});

it("the stale-timestamp row of docs/troubleshooting.md gives every signed timestamp's unit and tolerance, as its adapter checks it", async () => {
  const row = lineStarting(await read('docs/troubleshooting.md'), '| 401 | `stale-timestamp` |', 'docs/troubleshooting.md');
  const clauses = row.split(';');
  const wrong: string[] = [];
  for (const name of providerNames) {
    const timestamp = adapters.get(name)!.signedTimestamp;
    if (timestamp === undefined) {
      if (row.includes(title(name))) wrong.push(`${title(name)}: listed, and signs no timestamp`);
    } else if (timestamp === 'configured') {
      if (!row.includes(title(name))) wrong.push(`${title(name)}: missing (its route says its timestamp)`);
    } else {
      const item = timestampItem(name, timestamp);
      const clause = clauses.find((candidate) => candidate.includes(item));
      if (!clause) wrong.push(`${item}: missing`);
      else if (!clause.includes(`${tolerance(timestamp.toleranceMs)} for`)) wrong.push(`${item}: not under ${tolerance(timestamp.toleranceMs)}`);
    }
  }
  expect(wrong.join('; ')).toBe('');
});

it('"Before you start" of docs/providers.md names every provider whose connections need the key ring', async () => {
  const text = section(await read('docs/providers.md'), '## Before you start', 'docs/providers.md');
  expect(providersWithSecretIn('signing_key').map(title).filter((each) => !text.includes(each)).join(', '), 'the providers it does not name').toBe('');
});

it('the table of docs/providers.md has a row for every provider, with its endpoint', async () => {
  const text = await read('docs/providers.md');
  const missing = providerNames.filter((name) => !text.includes(`\n| ${title(name)} | \`POST /hooks/${name}/`));
  expect(missing.join(', '), 'the providers without their row').toBe('');
});

it('WHARF_SECRET_KEYS in docs/configuration.md names every provider whose connections need it', async () => {
  const row = lineStarting(await read('docs/configuration.md'), '| `WHARF_SECRET_KEYS` |', 'docs/configuration.md');
  expect(providersWithSecretIn('signing_key').map(title).filter((each) => !row.includes(each)).join(', '), 'the providers it does not name').toBe('');
});

it("the help of `wharf connections add --kind` names every provider's kinds", () => {
  const add = createProgram().commands.find((command) => command.name() === 'connections')
    ?.commands.find((command) => command.name() === 'add');
  const help = add?.options.find((option) => option.long === '--kind')?.description ?? '';
  // `webhook (gitlab, outline, …)`: each kind with the providers that take it.
  const listed = new Map([...help.matchAll(/(\w+) \(([^)]*)\)/g)].map((match) => [match[1]!, match[2]!.split(', ')]));
  const missing = providerNames.flatMap((name) => providers[name].kinds
    .filter((kind) => !listed.get(kind)?.includes(name)).map((kind) => `${name}: ${kind}`));
  expect(missing.join(', '), `not in ${JSON.stringify(help)}`).toBe('');
});
