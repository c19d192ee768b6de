// `wharf admissions`: the deliveries refused or dropped at admission (the
// provider got 202 and no row exists), newest first.
import { Command } from 'commander';
import { answerOf } from '../../operator/api/client.js';
import {
  idParser, operatorCommand, printJson, printTable, usageError, withApi, type OperatorOptions,
} from './operator-support.js';

const columns = ['id', 'at', 'provider', 'source', 'delivery_key', 'connection_id', 'workspace_id', 'reason'];

export function admissionsCommand(): Command {
  return operatorCommand('admissions', 'list refused and dropped deliveries, newest first')
    .option('-w, --workspace <id>', 'those that concern this workspace', idParser('workspace'))
    .option('--all', 'every one (instance admin)')
    .option('--limit <n>', 'entries per page (1-500)', '50')
    .option('--before <id>', 'only entries older than this id (the previous page\'s next_cursor)', idParser('cursor'))
    .action((options: OperatorOptions & { workspace?: string; all?: boolean; limit: string; before?: string }) => withApi(options, async (api) => {
      if (Boolean(options.all) === (options.workspace !== undefined)) throw usageError('give either --workspace <id> or --all');
      const query = { limit: options.limit, ...(options.before ? { cursor: options.before } : {}) };
      const page = await (options.all
        ? answerOf(api.admissions.$get({ query }))
        : answerOf(api.workspaces[':ws'].admissions.$get({ param: { ws: options.workspace! }, query })));
      if (options.json) printJson(page);
      else {
        printTable(page.entries, columns);
        if (page.next_cursor !== null) process.stdout.write(`next page: --before ${page.next_cursor}\n`);
      }
    }));
}
