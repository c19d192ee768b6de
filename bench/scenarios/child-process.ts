// The scenarios' processes (worker hosts, the Node receiver): TypeScript run
// by Node itself with tsx's loader (`node --import tsx`), so that the process
// we start is the one that serves, not a launcher in front of it: its pid is
// the one to watch and to signal. stdout is read as JSON lines; the tail of
// stderr is kept to explain an exit.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface ScenarioProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  /** Still running: no exit seen. */
  alive(): boolean;
  /** How it ended, once it has. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The last lines it wrote to stderr. */
  stderrTail(): string;
  /**
   * Lines of stderr, over its whole life, that name LISTEN or a listener (the
   * failover scenarios count them), by message (a JSON line's `msg`, else the
   * line's first 120 characters).
   */
  listenLines(): Map<string, number>;
  /** SIGTERM, then SIGKILL if it has not exited within `graceMs`; resolves with its exit. */
  stop(graceMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const keptStderr = 8_000;

/**
 * Starts `script` with `env` added to this process's environment; `onLine`
 * hears every stdout line parsed as JSON (others are ignored). Resolves when
 * the first line satisfying `ready` arrives; rejects if it exits first.
 */
export async function startScript<Line>(
  script: string,
  env: Record<string, string>,
  onLine: (line: Line) => void,
  ready: (line: Line) => boolean,
  readyTimeoutMs = 60_000,
): Promise<ScenarioProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  const listenLines = new Map<string, number>();
  let partial = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-keptStderr);
    const lines = (partial + chunk.toString()).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines.filter((text) => /listen/i.test(text))) {
      let message = line.slice(0, 120);
      try {
        const parsed = JSON.parse(line) as { msg?: unknown };
        if (typeof parsed.msg === 'string') message = parsed.msg.slice(0, 120);
      } catch {
        // Not a JSON line: its start.
      }
      listenLines.set(message, (listenLines.get(message) ?? 0) + 1);
    }
  });
  let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve((exit = { code, signal })));
  });
  let readyResolve!: () => void;
  const isReady = new Promise<void>((resolve) => (readyResolve = resolve));
  createInterface({ input: child.stdout! }).on('line', (text) => {
    let line: Line;
    try {
      line = JSON.parse(text) as Line;
    } catch {
      return;
    }
    onLine(line);
    if (ready(line)) readyResolve();
  });
  const process_: ScenarioProcess = {
    child,
    pid: child.pid!,
    alive: () => exit === undefined,
    exited,
    stderrTail: () => stderr,
    listenLines: () => listenLines,
    async stop(graceMs = 20_000) {
      if (exit) return exit;
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      try {
        return await exited;
      } finally {
        clearTimeout(killer);
      }
    },
  };
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      isReady,
      exited.then((how) => {
        throw new Error(`${script} exited before it was ready (${JSON.stringify(how)}):\n${stderr}`);
      }),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${script} not ready after ${readyTimeoutMs} ms:\n${stderr}`)), readyTimeoutMs);
      }),
    ]);
  } catch (error) {
    child.kill('SIGKILL');
    await exited;
    throw error;
  } finally {
    clearTimeout(timer);
  }
  return process_;
}
