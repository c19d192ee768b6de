// The `wharf` command, assembled from its verbs (each in its own module under
// commands/), without parsing anything: cli/wharf.ts runs it, and the
// configuration reference (cli/configuration-reference.ts) walks its options.
import { Command } from 'commander';
import { destinationsCommand } from './commands/destinations.js';
import { operatorCommands } from './commands/operator.js';
import { runtimeCommands } from './commands/runtime.js';
import { serveCommand } from './commands/serve.js';
import { startCommand } from './commands/start.js';

export function createProgram(): Command {
  const program = new Command('wharf')
    .description('Wharf: a durable webhook inbox in PostgreSQL')
    .showHelpAfterError()
    .configureOutput({ outputError: (text, write) => write(text) });
  program.addCommand(startCommand()).addCommand(serveCommand());
  for (const command of [...runtimeCommands(), ...operatorCommands(), destinationsCommand()]) program.addCommand(command);
  return program;
}
