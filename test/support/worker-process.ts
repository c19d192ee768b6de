// Spawns `node bin/wharf.js worker ...` as a real process and watches it.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
export const fixtureHandlers = (name: string): string => fileURLToPath(new URL(`../fixtures/handlers/${name}`, import.meta.url));

export interface WorkerProcess {
  child: ChildProcess;
  /** Everything written to stdout and stderr so far (JSON log lines). */
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const spawned = new Set<ChildProcess>();

export function spawnWorker(options: { databaseUrl: string; args: string[]; env?: Record<string, string> }): WorkerProcess {
  const child = spawn(process.execPath, ['bin/wharf.js', 'worker', ...options.args], {
    cwd: root,
    env: { ...process.env, ...options.env, DATABASE_URL: options.databaseUrl },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  spawned.add(child);
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => {
      spawned.delete(child);
      resolve({ code, signal });
    });
  });
  return { child, output: () => output, exited };
}

/** Kills every worker process a test left running (afterAll). */
export async function killSpawnedWorkers(): Promise<void> {
  const children = [...spawned];
  for (const child of children) child.kill('SIGKILL');
  await Promise.all(children.map((child) => new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve(null) : child.once('exit', resolve)))));
}
