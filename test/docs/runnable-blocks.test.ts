// How a page marks the shell blocks the docs-run test runs: only a block
// right after a `<!-- runnable … -->` comment, with its options read as
// written, and a mistake in a marker is an error, never a block skipped.
import { expect, it } from 'vitest';
import { runnableBlocks } from '../support/runnable-blocks.js';

const page = (...lines: string[]) => lines.join('\n');

it('takes the blocks after a marker, with their options, and leaves every other block alone', () => {
  const blocks = runnableBlocks('page.md', page(
    '```sh',
    'npm run something-illustrative',
    '```',
    '<!-- runnable expect="HTTP/1.1 202" expect=\'"outcome":"stored"\' timeout="5" -->',
    '```sh',
    'sh .wharf/sample-delivery.sh',
    '```',
    '````markdown',
    '<!-- runnable -->',
    '```sh',
    'echo inside another fence',
    '```',
    '````',
    '<!-- runnable id="neon" background ready="a" ready="b" -->',
    '```bash',
    'npm run neon-http-stand-in &',
    'npx wrangler dev',
    '```',
  ));
  expect(blocks).toEqual([
    {
      file: 'page.md', line: 5, code: 'sh .wharf/sample-delivery.sh', background: false, ready: [],
      expect: ['HTTP/1.1 202', '"outcome":"stored"'], timeoutMs: 5_000,
    },
    {
      file: 'page.md', line: 15, code: 'npm run neon-http-stand-in &\nnpx wrangler dev', id: 'neon', background: true,
      ready: ['a', 'b'], expect: [], timeoutMs: 60_000,
    },
  ]);
});

it('refuses a marker it cannot follow, naming the line', () => {
  expect(() => runnableBlocks('p.md', page('<!-- runnable expct="x" -->', '```sh', 'true', '```')))
    .toThrow('p.md:1: unknown runnable option "expct"');
  expect(() => runnableBlocks('p.md', page('text', '<!-- runnable -->', '', '```sh', 'true', '```')))
    .toThrow('p.md:2: a runnable marker must come just before a ```sh fence');
  expect(() => runnableBlocks('p.md', page('<!-- runnable background expect="x" -->', '```sh', 'true', '```')))
    .toThrow('a background block takes ready="…", not expect or until');
  expect(() => runnableBlocks('p.md', page('<!-- runnable until -->', '```sh', 'true', '```')))
    .toThrow('runnable option until needs a value');
  expect(() => runnableBlocks('p.md', page('<!-- runnable -->', '```sh', 'true')))
    .toThrow('p.md:1: the runnable block is never closed');
});
