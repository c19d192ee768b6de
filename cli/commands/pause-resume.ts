// `wharf pause` and `wharf resume`: hold a workspace's or one connection's
// events (stored, answered 202, handed to no worker) and let them run again,
// in their usual order.
import type { Command } from 'commander';
import { printJson, printTable, usageError, idParser, operatorCommand, withApi, type OperatorOptions } from './operator-support.js';
import { setConnectionState } from './connections.js';
import { setWorkspaceState } from './workspaces.js';

interface TargetOptions extends OperatorOptions {
  workspace?: string;
  connection?: string;
}

function holdCommand(verb: 'pause' | 'resume', description: string): Command {
  return operatorCommand(verb, description)
    .option('-w, --workspace <id>', 'the workspace', idParser('workspace'))
    .option('-c, --connection <id>', 'one connection', idParser('connection'))
    .action((options: TargetOptions) => withApi(options, async (api) => {
      if ((options.workspace === undefined) === (options.connection === undefined)) {
        throw usageError('give either --workspace <id> or --connection <id>');
      }
      const changed = options.workspace !== undefined
        ? await setWorkspaceState(api, options.workspace, verb)
        : await setConnectionState(api, options.connection!, verb);
      if (options.json) printJson(changed);
      else printTable([changed], ['id', 'state']);
    }));
}

export function pauseResumeCommands(): Command[] {
  return [
    holdCommand('pause', "hold a workspace's or connection's events: stored, handed to no worker until resumed"),
    holdCommand('resume', 'let held events run again, in their usual order'),
  ];
}
