// `wharf subscribe` and `wharf unsubscribe`.
import type { Command } from 'commander';
import { answerOf } from '../../operator/api/client.js';
import { idParser, operatorCommand, printJson, withApi, type OperatorOptions } from './operator-support.js';

function subscriptionCommand(name: 'subscribe' | 'unsubscribe', description: string): Command {
  return operatorCommand(name, description)
    .argument('<connection>', 'connection id', idParser('connection'))
    .argument('<subject>', 'e.g. repo:acme/api, org:acme, project:42, channel:C123')
    .action((connection: string, subject: string, options: OperatorOptions) => withApi(options, async (api) => {
      const request = { param: { id: connection }, json: { subject } };
      const { changed } = await answerOf(name === 'subscribe'
        ? api.connections[':id'].subscriptions.$post(request)
        : api.connections[':id'].subscriptions.$delete(request));
      if (options.json) printJson({ connection_id: Number(connection), subject, changed });
      else process.stdout.write(`${changed ? `${name}d` : 'unchanged'}: connection ${connection} ${subject}\n`);
    }));
}

export function subscriptionCommands(): Command[] {
  return [
    subscriptionCommand('subscribe', "deliver events about a subject to the connection's workspace"),
    subscriptionCommand('unsubscribe', 'stop delivering events about a subject'),
  ];
}
