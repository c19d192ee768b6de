// `wharf dead list`.
import { Command } from 'commander';
import { listEventPage, pageQuery, printPage, withPageOptions, type PageOptions } from './events.js';
import { operatorCommand, ownerOf, withApi } from './operator-support.js';

export function deadCommand(): Command {
  const command = new Command('dead').description('dead letters: events that will not be retried without a replay');
  command.addCommand(withPageOptions(operatorCommand('list', 'list dead letters, newest first'))
    .action((options: PageOptions) => withApi(options, async (api) => {
      printPage(options, await listEventPage(api, ownerOf(options), pageQuery(options), true));
    })));
  return command;
}
