// Runs the real `wharf` command (node bin/wharf.js) to completion, as a user would.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** `env` replaces DATABASE_URL and friends; undefined values are removed. */
export function runWharf(args: string[], env: Record<string, string | undefined>): Promise<CliResult> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env };
  for (const [key, value] of Object.entries(env)) {
    if (value === undefined) delete childEnv[key];
    else childEnv[key] = value;
  }
  return new Promise((resolve) => {
    execFile(process.execPath, ['bin/wharf.js', ...args], { cwd: root, env: childEnv, timeout: 30_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      });
  });
}
