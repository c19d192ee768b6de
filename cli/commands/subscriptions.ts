// `wharf subscribe` and `wharf unsubscribe`.
import type { Command } from 'commander';
import { setSubscription } from '../../operator/sql/connections.js';
import { idParser, operatorCommand, printJson, withDatabase, type OperatorOptions } from './operator-support.js';

function subscriptionCommand(name: 'subscribe' | 'unsubscribe', subscribed: boolean, description: string): Command {
  return operatorCommand(name, description)
    .argument('<connection>', 'connection id', idParser('connection'))
    .argument('<subject>', 'e.g. repo:acme/api, org:acme, project:42, channel:C123')
    .action((connection: string, subject: string, options: OperatorOptions) => withDatabase(options, async (db) => {
      const changed = await setSubscription(db, connection, subject, subscribed);
      if (options.json) printJson({ connection_id: Number(connection), subject, changed });
      else process.stdout.write(`${changed ? (subscribed ? 'subscribed' : 'unsubscribed') : 'unchanged'}: connection ${connection} ${subject}\n`);
    }));
}

export function subscriptionCommands(): Command[] {
  return [
    subscriptionCommand('subscribe', true, "deliver events about a subject to the connection's workspace"),
    subscriptionCommand('unsubscribe', false, 'stop delivering events about a subject'),
  ];
}
