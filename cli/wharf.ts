// The `wharf` command. Each verb lives in its own module under commands/;
// this file only assembles them.
import { Command } from 'commander';
import { operatorCommands } from './commands/operator.js';
import { runtimeCommands } from './commands/runtime.js';
import { serveCommand } from './commands/serve.js';
import { startCommand } from './commands/start.js';

const program = new Command('wharf')
  .description('Wharf: a durable webhook inbox in PostgreSQL')
  .showHelpAfterError()
  .configureOutput({ outputError: (text, write) => write(text) });

program.addCommand(startCommand()).addCommand(serveCommand());
for (const command of [...runtimeCommands(), ...operatorCommands()]) program.addCommand(command);

try {
  await program.parseAsync(process.argv);
} catch (error) {
  // A clear line, not a stack: verbs throw errors meant for the operator.
  process.stderr.write(`wharf: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
}
