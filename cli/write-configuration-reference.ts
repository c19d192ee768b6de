// `npm run docs:config`: writes docs/configuration.md from the code (see
// configuration-reference.ts). Run it after adding or changing an environment
// variable (db/environment.ts), a CLI option or a var of wrangler.toml.
import { readFile, writeFile } from 'node:fs/promises';
import { renderConfigurationReference } from './configuration-reference.js';
import { createProgram } from './program.js';

const root = new URL('../', import.meta.url);
const target = new URL('docs/configuration.md', root);
const text = renderConfigurationReference({
  program: createProgram(),
  wranglerToml: await readFile(new URL('wrangler.toml', root), 'utf8'),
});
await writeFile(target, text);
process.stdout.write(`wrote ${target.pathname}\n`);
