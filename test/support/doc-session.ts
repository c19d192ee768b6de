// Runs the runnable blocks of a document as its reader would, in bash: one
// after another in one session whose exported variables and directory carry
// from block to block (as in one terminal), the background ones each in a
// process group of its own (a second terminal), stopped with SIGINT (Ctrl-C)
// when the session closes. The session's directory is a scratch checkout:
// every top-level entry of the repository linked into it, except the state a
// run leaves behind (.wharf/, .wrangler/), so that what the blocks write stays
// in it and nothing of a developer's own .wharf/ is read.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RunnableBlock } from './runnable-blocks.js';

const repository = fileURLToPath(new URL('../../', import.meta.url));
/** What a run of the docs writes, and what must not leak in from the repository. */
const notLinked = new Set(['.git', '.wharf', '.wrangler', '.dev.vars', '.scratch', 'dist']);

export interface BlockResult {
  code: number | null;
  output: string;
}

interface Background {
  block: RunnableBlock;
  child: ChildProcess;
  output(): string;
  exited: Promise<void>;
  hasExited(): boolean;
}

const where = (block: RunnableBlock) => `${block.file}:${block.line}`;
const tail = (text: string) => (text.length > 4000 ? `…${text.slice(-4000)}` : text);

function failure(block: RunnableBlock, reason: string, output: string): Error {
  return new Error(`${where(block)}: ${reason}\n--- block ---\n${block.code}\n--- output ---\n${tail(output)}`);
}

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-child.pid!, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

export class DocSession {
  private readonly backgrounds: Background[] = [];
  private started = false;

  private constructor(
    /** The scratch checkout the blocks run in. */
    readonly directory: string,
    private readonly state: string,
    private readonly env: Record<string, string>,
  ) {}

  /** A scratch checkout and a session in it, starting with exactly `env` exported. */
  static async open(env: Record<string, string>): Promise<DocSession> {
    const base = await mkdtemp(join(tmpdir(), 'wharf-docs-'));
    const directory = join(base, 'checkout');
    const state = join(base, 'session');
    await mkdir(directory);
    await mkdir(state);
    for (const entry of await readdir(repository)) {
      if (!notLinked.has(entry)) await symlink(join(repository, entry), join(directory, entry));
    }
    await writeFile(join(state, 'cwd'), directory);
    return new DocSession(directory, state, env);
  }

  /**
   * The block in bash: the session's variables and directory first, and,
   * for a block in the foreground, both saved again after it succeeded.
   */
  private script(block: RunnableBlock, save: boolean): string {
    const state = JSON.stringify(this.state);
    return [
      'set -eo pipefail',
      `if [ -f ${state}/env.sh ]; then . ${state}/env.sh; fi`,
      `cd "$(cat ${state}/cwd)"`,
      block.code,
      ...(save ? [`export -p > ${state}/env.sh`, `pwd > ${state}/cwd`] : []),
      '',
    ].join('\n');
  }

  private spawn(block: RunnableBlock, save: boolean): ChildProcess {
    // The first block starts from the session's environment; later ones from
    // the variables the blocks before them left (env.sh), like one terminal.
    const env = this.started ? { PATH: this.env.PATH ?? '/usr/bin:/bin' } : this.env;
    this.started ||= save;
    return spawn('/bin/bash', ['-c', this.script(block, save)], {
      cwd: this.directory, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'],
    });
  }

  /** Runs one foreground block to its end, within its timeout. */
  private once(block: RunnableBlock): Promise<BlockResult> {
    const child = this.spawn(block, true);
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        signalGroup(child, 'SIGKILL');
        output += `\n(killed after ${block.timeoutMs / 1000} s)`;
      }, block.timeoutMs);
      child.once('close', (code) => {
        clearTimeout(timer);
        // A block in the foreground leaves nothing running (as a terminal's
        // job would); what must keep running is a background block.
        signalGroup(child, 'SIGKILL');
        resolve({ code, output });
      });
    });
  }

  /** Runs `block` as its marker says; throws with the block and its output when it does not do what the marker says. */
  async run(block: RunnableBlock): Promise<BlockResult> {
    if (block.background) {
      await this.startBackground(block);
      return { code: null, output: '' };
    }
    const deadline = Date.now() + block.timeoutMs;
    for (;;) {
      const result = await this.once({ ...block, timeoutMs: Math.max(1_000, deadline - Date.now()) });
      // A run that fails fails the block, `until` or not: it waits for a
      // state, never for a command to start working.
      if (result.code !== 0) throw failure(block, `exited ${result.code}`, result.output + this.backgroundOutput());
      if (block.until === undefined || result.output.includes(block.until)) {
        const missing = block.expect.filter((text) => !result.output.includes(text));
        if (missing.length > 0) throw failure(block, `did not print ${missing.map((text) => JSON.stringify(text)).join(', ')}`, result.output);
        return result;
      }
      if (Date.now() >= deadline - 1_000) {
        throw failure(block, `never printed ${JSON.stringify(block.until)}`, result.output + this.backgroundOutput());
      }
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
  }

  private async startBackground(block: RunnableBlock): Promise<void> {
    const child = this.spawn(block, false);
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    let exited = false;
    const background: Background = {
      block, child, output: () => output, hasExited: () => exited,
      exited: new Promise((resolve) => child.once('close', () => {
        exited = true;
        resolve();
      })),
    };
    this.backgrounds.push(background);
    const deadline = Date.now() + block.timeoutMs;
    const waitingFor = () => block.ready.filter((text) => !output.includes(text)).map((text) => JSON.stringify(text)).join(', ');
    while (waitingFor() !== '') {
      if (exited) throw failure(block, `ended before it printed ${waitingFor()}`, output);
      if (Date.now() >= deadline) throw failure(block, `did not print ${waitingFor()} within ${block.timeoutMs / 1000} s`, output);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** What the background blocks printed so far, for a failure's message. */
  backgroundOutput(): string {
    return this.backgrounds.map((each) => `\n--- ${where(each.block)} (background) ---\n${tail(each.output())}`).join('');
  }

  /** Ctrl-C to a background block (all of them by default), then SIGKILL to what is left after `graceMs`. */
  async stop(block?: RunnableBlock, graceMs = 20_000): Promise<void> {
    const stopping = this.backgrounds.filter((each) => block === undefined || each.block === block);
    await Promise.all(stopping.map(async (each) => {
      if (!each.hasExited()) signalGroup(each.child, 'SIGINT');
      const timer = setTimeout(() => signalGroup(each.child, 'SIGKILL'), graceMs);
      await each.exited;
      clearTimeout(timer);
      // What the group's leader left behind (a job started with &) goes too.
      signalGroup(each.child, 'SIGKILL');
    }));
  }

  /** Stops every background block and removes the scratch checkout. */
  async close(): Promise<void> {
    await this.stop();
    await rm(join(this.directory, '..'), { recursive: true, force: true });
  }
}
