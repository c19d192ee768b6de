// The `wharf` command: its verbs are assembled in program.ts; this file runs it.
import { createProgram } from './program.js';

try {
  await createProgram().parseAsync(process.argv);
} catch (error) {
  // A clear line, not a stack: verbs throw errors meant for the operator.
  process.stderr.write(`wharf: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
}
