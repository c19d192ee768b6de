// Runs the `wharf` command to completion, as a user would: the real binary
// (node bin/wharf.js) in a process of its own, or, where a test runs many
// lines and each new process would cost seconds of CPU, the same program in
// this process.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { CommanderError } from 'commander';
import { vi } from 'vitest';

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
    // `migrate --dry-run` prints every migration: megabytes, past execFile's default 1 MB, which would kill it.
    execFile(process.execPath, ['bin/wharf.js', ...args], { cwd: root, env: childEnv, timeout: 30_000, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      });
  });
}

const text = (chunk: string | Uint8Array): string => (typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));

/**
 * As runWharf, by cli/program.ts in this process, one run at a time: `env`
 * is this process's for the run (commander reads DATABASE_URL as it parses,
 * a verb WHARF_SECRET_KEYS as it runs) and put back after, and what the
 * verbs write to stdout and stderr is captured. A failure is reported as
 * cli/wharf.ts reports it; commander's own (an unknown option) exits with
 * its code instead of ending this process.
 */
export async function runWharfInProcess(args: string[], env: Record<string, string | undefined>): Promise<CliResult> {
  const savedEnv = Object.fromEntries(Object.keys(env).map((key) => [key, process.env[key]]));
  const savedExitCode = process.exitCode;
  const stdout: string[] = [];
  const stderr: string[] = [];
  // Imported here: the suites that run the binary need none of the program in their own process.
  const [{ createProgram }, { commandsOf }] = await Promise.all([
    import('../../cli/program.js'), import('../../cli/configuration-reference.js'),
  ]);
  const program = createProgram();
  for (const command of [program, ...commandsOf(program)]) {
    command.exitOverride().configureOutput({
      writeOut: (line) => stdout.push(line),
      writeErr: (line) => stderr.push(line),
      outputError: (line) => stderr.push(line),
    });
  }
  const writeOut = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => stdout.push(text(chunk)) > 0);
  const writeErr = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => stderr.push(text(chunk)) > 0);
  let code = 0;
  try {
    for (const [key, value] of Object.entries(env)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
    process.exitCode = undefined;
    await program.parseAsync(args, { from: 'user' });
    code = typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      code = error.exitCode;
    } else {
      stderr.push(`wharf: ${error instanceof Error ? error.message : String(error)}\n`);
      code = 1;
    }
  } finally {
    writeOut.mockRestore();
    writeErr.mockRestore();
    process.exitCode = savedExitCode;
    for (const [key, value] of Object.entries(savedEnv)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  }
  return { code, stdout: stdout.join(''), stderr: stderr.join('') };
}
