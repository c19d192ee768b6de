#!/usr/bin/env node
// The `wharf` command. An installed package runs the compiled dist/; a
// checkout runs the TypeScript sources, through tsx registered in this
// process (Node 20 cannot run .ts by itself) so that signals reach the CLI.
import { existsSync } from 'node:fs';

const source = new URL('../cli/wharf.ts', import.meta.url);
if (existsSync(source)) {
  const { register } = await import('tsx/esm/api');
  register();
  await import(source.href);
} else {
  await import('../dist/cli/wharf.js');
}
