// `wharf workspaces add|list|suspend|pause|resume|activate`.
import { Command } from 'commander';
import { createWorkspace, setWorkspaceState } from '../../operator/sql/connections.js';
import { listWorkspaces, type Workspace } from '../../operator/sql/operator.js';
import { idParser, operatorCommand, printJson, printTable, withDatabase, type OperatorOptions } from './operator-support.js';

const columns = ['id', 'state', 'connections', 'created_at'];

function print(options: OperatorOptions, workspaces: Workspace[] | Workspace): void {
  if (options.json) printJson(workspaces);
  else printTable(Array.isArray(workspaces) ? workspaces : [workspaces], columns);
}

export function workspacesCommand(): Command {
  const command = new Command('workspaces').description('create and list workspaces (tenants)');
  command.addCommand(operatorCommand('add', 'create a workspace (ACTIVE) with the host application\'s id')
    .argument('<id>', 'workspace id', idParser('workspace'))
    .action((id: string, options: OperatorOptions) =>
      withDatabase(options, async (db) => print(options, await createWorkspace(db, id)))));
  command.addCommand(operatorCommand('list', 'list every workspace')
    .action((options: OperatorOptions) =>
      withDatabase(options, async (db) => print(options, await listWorkspaces(db)))));
  for (const [name, state] of [['suspend', 'SUSPENDED'], ['pause', 'PAUSED'], ['resume', 'ACTIVE'], ['activate', 'ACTIVE']] as const) {
    command.addCommand(operatorCommand(name, `set a workspace ${state}`)
      .argument('<id>', 'workspace id', idParser('workspace'))
      .action((id: string, options: OperatorOptions) =>
        withDatabase(options, async (db) => print(options, await setWorkspaceState(db, id, state)))));
  }
  return command;
}
