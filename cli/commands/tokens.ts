// `wharf tokens create|list|revoke`: workspace API tokens.
import { Command } from 'commander';
import { answerOf } from '../../operator/api/client.js';
import {
  idParser, operatorCommand, printJson, printTable, usageError, withApi, type OperatorOptions,
} from './operator-support.js';

interface TokenOptions extends OperatorOptions {
  workspace: string;
}

export function tokensCommand(): Command {
  const command = new Command('tokens').description('API tokens that reach one workspace');
  command.addCommand(operatorCommand('create', 'create a token and print it (shown only now)')
    .requiredOption('-w, --workspace <id>', 'the workspace', idParser('workspace'))
    .requiredOption('--name <name>', 'what the token is for; recorded as token:<name> on replays')
    .action((options: TokenOptions & { name: string }) => withApi(options, async (api) => {
      const created = await answerOf(api.workspaces[':ws'].tokens.$post({
        param: { ws: options.workspace }, json: { name: options.name },
      }));
      if (options.json) printJson(created);
      else process.stdout.write(`${created.token}\n`);
    })));
  command.addCommand(operatorCommand('list', "list a workspace's tokens (never their secrets)")
    .requiredOption('-w, --workspace <id>', 'the workspace', idParser('workspace'))
    .action((options: TokenOptions) => withApi(options, async (api) => {
      const tokens = await answerOf(api.workspaces[':ws'].tokens.$get({ param: { ws: options.workspace } }));
      if (options.json) printJson(tokens);
      else printTable(tokens, ['id', 'name', 'created_at', 'last_used_at', 'revoked_at']);
    })));
  command.addCommand(operatorCommand('revoke', 'revoke a token')
    .requiredOption('-w, --workspace <id>', 'the workspace', idParser('workspace'))
    .argument('<id>', 'token id', idParser('token id'))
    .action((id: string, options: TokenOptions) => withApi(options, async (api) => {
      await answerOf(api.workspaces[':ws'].tokens[':id'].$delete({ param: { ws: options.workspace, id } }))
        .catch((error: unknown) => {
          if ((error as { status?: number }).status === 404) throw usageError(`no live token ${id} in workspace ${options.workspace}`);
          throw error;
        });
      if (options.json) printJson({ id: Number(id), revoked: true });
      else process.stdout.write(`revoked token ${id}\n`);
    })));
  return command;
}
