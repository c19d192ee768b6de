// Every relative link of README.md and docs/ leads somewhere: to a file of
// the repository and, with a #fragment, to a heading of that page (GitHub's
// anchors), so that a renamed page or section cannot strand a reader.
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces as `-`. */
function anchorOf(heading: string): string {
  return heading.trim().toLowerCase().replace(/`/g, '').replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
}

function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const heading = !fenced && /^#{1,6}\s+(.*)$/.exec(line);
    if (heading) anchors.add(anchorOf(heading[1]!));
  }
  return anchors;
}

/** The relative links of a page outside code: [text](target) and ![alt](target). */
function linksOf(markdown: string): string[] {
  const prose = markdown.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)].map((match) => match[1]!).filter((target) => !/^[a-z]+:/.test(target));
}

it('every relative link of README.md and docs/ leads to a file, and its #fragment to a heading there', async () => {
  const pages = ['README.md', ...(await readdir(join(root, 'docs'))).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`)];
  const broken: string[] = [];
  for (const page of pages) {
    for (const link of linksOf(await readFile(join(root, page), 'utf8'))) {
      const [path, fragment] = link.split('#') as [string, string | undefined];
      const target = path === '' ? page : normalize(join(dirname(page), path));
      if (!existsSync(join(root, target))) {
        broken.push(`${page}: ${link} (no ${target})`);
        continue;
      }
      if (fragment !== undefined && target.endsWith('.md') && !anchorsOf(await readFile(join(root, target), 'utf8')).has(fragment)) {
        broken.push(`${page}: ${link} (no heading #${fragment} in ${target})`);
      }
    }
  }
  expect(broken).toEqual([]);
});

it('makes the anchors GitHub makes', () => {
  expect(anchorOf('The `wharf` command')).toBe('the-wharf-command');
  expect(anchorOf('Recovering GitHub deliveries: the redelivery sweeper')).toBe('recovering-github-deliveries-the-redelivery-sweeper');
  expect(anchorOf('Refusals and drops: 202, but no event')).toBe('refusals-and-drops-202-but-no-event');
  expect(anchorOf('On Node, behind a proxy')).toBe('on-node-behind-a-proxy');
});
