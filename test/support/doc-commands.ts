// The `npx wharf-inbox` lines of a Markdown page's shell blocks, as the words
// a shell would pass to the command: for a test that runs a page's lines
// through the CLI's code in its own process (runWharfInProcess) instead of a
// shell. Quoting is read as bash reads it; anything a shell would expand or
// redirect is an error, never passed on as text, and so is a block that mixes
// these lines with other commands, which would run in a reader's shell and
// not in the test.

export interface DocCommand {
  /** 1-based line where the command starts. */
  line: number;
  /** The command as written, its continuation lines joined. */
  text: string;
  /** The words after `npx wharf-inbox`. */
  args: string[];
}

const command = 'npx wharf-inbox';

/** The words of one line of shell, up to a comment. */
export function shellWords(text: string, where: string): string[] {
  const words: string[] = [];
  let word: string | undefined;
  const fail = (what: string): never => {
    throw new Error(`${where}: ${what} in ${JSON.stringify(text)}: the test passes words, it runs no shell`);
  };
  for (let at = 0; at < text.length; at += 1) {
    const char = text[at]!;
    if (/\s/.test(char)) {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else if (char === '#' && word === undefined) {
      break;
    } else if (char === "'") {
      const end = text.indexOf("'", at + 1);
      if (end < 0) fail('an unclosed quote');
      word = (word ?? '') + text.slice(at + 1, end);
      at = end;
    } else if (char === '"') {
      let quoted = '';
      for (at += 1; text[at] !== '"'; at += 1) {
        if (at >= text.length) fail('an unclosed quote');
        if (text[at] === '$' || text[at] === '`') fail('an expansion');
        if (text[at] === '\\' && '"\\$`'.includes(text[at + 1] ?? '')) at += 1;
        quoted += text[at];
      }
      word = (word ?? '') + quoted;
    } else if (char === '\\') {
      at += 1;
      word = (word ?? '') + (text[at] ?? '');
    } else if ('$`|&;<>(){}*?[]~'.includes(char)) {
      fail(`${JSON.stringify(char)}, which a shell would read`);
    } else {
      word = (word ?? '') + char;
    }
  }
  if (word !== undefined) words.push(word);
  return words;
}

/** The `npx wharf-inbox` commands of the ```sh blocks of `text` (the page `file`), in order. */
export function wharfCommands(file: string, text: string): DocCommand[] {
  const lines = text.split('\n');
  const commands: DocCommand[] = [];
  for (let index = 0; index < lines.length; index += 1) {
    const opening = /^\s*(`{3,}|~{3,})(.*)$/.exec(lines[index]!);
    if (!opening) continue;
    const fence = opening[1]!;
    const end = lines.findIndex((candidate, at) => at > index && candidate.trim() === fence);
    if (end < 0) throw new Error(`${file}:${index + 1}: the block is never closed`);
    if (/^(sh|bash|shell)$/.test(opening[2]!.trim())) {
      // Continuation lines joined, each command with the line it starts on.
      const block: { line: number; text: string }[] = [];
      for (let at = index + 1; at < end; at += 1) {
        const continued = block.at(-1)?.text.endsWith('\\');
        if (continued) block.at(-1)!.text = `${block.at(-1)!.text.slice(0, -1)} ${lines[at]!.trim()}`;
        else block.push({ line: at + 1, text: lines[at]!.trim() });
      }
      const statements = block.filter((each) => each.text !== '' && !each.text.startsWith('#'));
      const ours = statements.filter((each) => each.text.startsWith(`${command} `));
      if (ours.length > 0 && ours.length < statements.length) {
        const other = statements.find((each) => !ours.includes(each))!;
        throw new Error(`${file}:${other.line}: a block of ${command} lines holds another command, which the test would not run`);
      }
      for (const each of ours) {
        const where = `${file}:${each.line}`;
        commands.push({ line: each.line, text: each.text, args: shellWords(each.text, where).slice(command.split(' ').length) });
      }
    }
    index = end;
  }
  return commands;
}
