// `wharf workspaces add|list|suspend|pause|resume|activate`.
import { Command } from 'commander';
import { answerOf, type OperatorApiClient } from '../../operator/api/client.js';
import type { Workspace } from '../../operator/sql/operator.js';
import type { StateVerb } from './connections.js';
import { idParser, operatorCommand, printJson, printTable, withApi, type OperatorOptions } from './operator-support.js';

const columns = ['id', 'state', 'connections', 'created_at'];

function print(options: OperatorOptions, workspaces: Workspace[] | Workspace): void {
  if (options.json) printJson(workspaces);
  else printTable(Array.isArray(workspaces) ? workspaces : [workspaces], columns);
}

/** Sets a workspace's state through the API (resume and activate: ACTIVE). */
export function setWorkspaceState(api: OperatorApiClient, ws: string, verb: StateVerb): Promise<Workspace> {
  const workspace = api.workspaces[':ws'];
  const param = { ws };
  switch (verb) {
    case 'suspend': return answerOf(workspace.suspend.$post({ param }));
    case 'pause': return answerOf(workspace.pause.$post({ param }));
    case 'resume': return answerOf(workspace.resume.$post({ param }));
    case 'activate': return answerOf(workspace.activate.$post({ param }));
  }
}

export function workspacesCommand(): Command {
  const command = new Command('workspaces').description('create and list workspaces (tenants)');
  command.addCommand(operatorCommand('add', 'create a workspace (ACTIVE) with the host application\'s id')
    .argument('<id>', 'workspace id', idParser('workspace'))
    .action((id: string, options: OperatorOptions) =>
      withApi(options, async (api) => print(options, await answerOf(api.workspaces.$post({ json: { id } }))))));
  command.addCommand(operatorCommand('list', 'list every workspace')
    .action((options: OperatorOptions) =>
      withApi(options, async (api) => print(options, await answerOf(api.workspaces.$get())))));
  for (const verb of ['suspend', 'pause', 'resume', 'activate'] as const) {
    command.addCommand(operatorCommand(verb, `${verb} a workspace`)
      .argument('<id>', 'workspace id', idParser('workspace'))
      .action((id: string, options: OperatorOptions) =>
        withApi(options, async (api) => print(options, await setWorkspaceState(api, id, verb)))));
  }
  return command;
}
