// `wharf dead list`.
import { Command } from 'commander';
import { listDead } from '../../operator/sql/operator.js';
import { pageFilter, printPage, withPageOptions, type PageOptions } from './events.js';
import { operatorCommand, ownerOf, withDatabase } from './operator-support.js';

export function deadCommand(): Command {
  const command = new Command('dead').description('dead letters: events that will not be retried without a replay');
  command.addCommand(withPageOptions(operatorCommand('list', 'list dead letters, newest first'))
    .action((options: PageOptions) => withDatabase(options, async (db) => {
      printPage(options, await listDead(db, ownerOf(options), pageFilter(options)));
    })));
  return command;
}
