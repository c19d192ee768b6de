// The `wharf` command. Each verb lives in its own module under commands/;
// this file only assembles them.
import { Command } from 'commander';
import { runtimeCommands } from './commands/runtime.js';
import { operatorCommands } from './commands/operator.js';

const program = new Command('wharf')
  .description('Wharf: a durable webhook inbox in PostgreSQL')
  .showHelpAfterError()
  .configureOutput({ outputError: (text, write) => write(text) });

for (const command of [...runtimeCommands(), ...operatorCommands()]) program.addCommand(command);

await program.parseAsync(process.argv);
