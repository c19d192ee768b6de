// The shell blocks of a Markdown document that are marked runnable: an HTML
// comment on the line just before the fence, which a reader of the rendered
// page does not see. A block without it is an illustration (a production
// deploy, a command with placeholders) and never runs.
//
//   <!-- runnable -->                          runs; must exit 0
//   <!-- runnable expect="HTTP/1.1 202" -->     ... and print this (repeatable; '…' quotes a value holding ")
//   <!-- runnable until="DONE" -->              runs again, once a second, until it prints this (each run must exit 0)
//   <!-- runnable background ready="Ready on" -->  keeps running, as in a terminal of its own, once it printed this (repeatable)
//   <!-- runnable id="neon" timeout="90" -->    a name a test can hook after; seconds it may take (default 60)
//   ```sh
//   npm start
//   ```

export interface RunnableBlock {
  file: string;
  /** 1-based line of the fence. */
  line: number;
  code: string;
  id?: string;
  background: boolean;
  /** A background block is running once it printed each of these. */
  ready: string[];
  expect: string[];
  until?: string;
  timeoutMs: number;
}

const marker = /^<!--\s*runnable(?:\s+(.*?))?\s*-->\s*$/;
const option = /([a-z]+)(?:=(?:"([^"]*)"|'([^']*)'))?/g;

function parseOptions(text: string, where: string): Omit<RunnableBlock, 'file' | 'line' | 'code'> {
  const block: Omit<RunnableBlock, 'file' | 'line' | 'code'> = { background: false, ready: [], expect: [], timeoutMs: 60_000 };
  for (const match of text.matchAll(option)) {
    const [, key, double, single] = match;
    const value = double ?? single;
    const needsValue = () => {
      if (value === undefined) throw new Error(`${where}: runnable option ${key} needs a value (${key}="…")`);
      return value;
    };
    switch (key) {
      case 'background': block.background = true; break;
      case 'ready': block.ready.push(needsValue()); break;
      case 'expect': block.expect.push(needsValue()); break;
      case 'until': block.until = needsValue(); break;
      case 'id': block.id = needsValue(); break;
      case 'timeout': {
        const seconds = Number(needsValue());
        if (!(seconds > 0)) throw new Error(`${where}: timeout is a number of seconds`);
        block.timeoutMs = seconds * 1000;
        break;
      }
      default: throw new Error(`${where}: unknown runnable option ${JSON.stringify(key)}`);
    }
  }
  const leftOver = text.replace(option, '').trim();
  if (leftOver !== '') throw new Error(`${where}: cannot read the runnable options ${JSON.stringify(leftOver)}`);
  if (block.background && (block.until !== undefined || block.expect.length > 0)) {
    throw new Error(`${where}: a background block takes ready="…", not expect or until`);
  }
  if (!block.background && block.ready.length > 0) throw new Error(`${where}: ready="…" is for a background block`);
  return block;
}

/** The runnable blocks of `text` (the document `file`), in order. */
export function runnableBlocks(file: string, text: string): RunnableBlock[] {
  const lines = text.split('\n');
  const blocks: RunnableBlock[] = [];
  let fence: string | undefined;
  for (let index = 0; index < lines.length; index += 1) {
    const line = lines[index]!;
    // Inside another fence a marker is only text.
    if (fence !== undefined) {
      if (line.trim() === fence) fence = undefined;
      continue;
    }
    const opening = /^\s*(`{3,}|~{3,})/.exec(line);
    if (opening) {
      fence = opening[1];
      continue;
    }
    const marked = marker.exec(line.trim());
    if (!marked) continue;
    const where = `${file}:${index + 1}`;
    const next = lines[index + 1] ?? '';
    const shell = /^(`{3,})(sh|bash|shell)\s*$/.exec(next.trim());
    if (!shell) throw new Error(`${where}: a runnable marker must come just before a \`\`\`sh fence`);
    const end = lines.findIndex((candidate, at) => at > index + 1 && candidate.trim() === shell[1]);
    if (end < 0) throw new Error(`${where}: the runnable block is never closed`);
    blocks.push({
      file, line: index + 2, code: lines.slice(index + 2, end).join('\n'), ...parseOptions(marked[1] ?? '', where),
    });
    index = end;
  }
  return blocks;
}
