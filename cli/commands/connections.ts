// `wharf connections add|list|suspend|pause|resume|activate|rotate-secret`.
import { Command } from 'commander';
import { parseKeyRing } from '../../db/secret-box.js';
import { rotateConnectionSecret } from '../../operator/sql/connection-secrets.js';
import { createConnection, setConnectionState } from '../../operator/sql/connections.js';
import { listConnections, type Connection } from '../../operator/sql/operator.js';
import {
  idParser, operatorCommand, printJson, printTable, usageError, withDatabase, type OperatorOptions,
} from './operator-support.js';

const columns = ['id', 'workspace_id', 'provider', 'source', 'kind', 'external_id', 'state', 'subscriptions'];

function print(options: OperatorOptions, connections: Connection[] | Connection): void {
  if (options.json) printJson(connections);
  else printTable(Array.isArray(connections) ? connections : [connections], columns);
}

interface AddOptions extends OperatorOptions {
  workspace: string;
  provider: string;
  source: string;
  kind: string;
  externalId?: string;
  route?: string;
}

function parseRoute(text: string | undefined): Record<string, unknown> {
  if (text === undefined) return {};
  let route: unknown;
  try {
    route = JSON.parse(text);
  } catch {
    throw usageError('--route must be a JSON object');
  }
  if (typeof route !== 'object' || route === null || Array.isArray(route)) throw usageError('--route must be a JSON object');
  return route as Record<string, unknown>;
}

export function connectionsCommand(): Command {
  const command = new Command('connections').description('links between a provider and a workspace');
  command.addCommand(operatorCommand('add', 'create a connection (ACTIVE), or set the route of an existing one')
    .requiredOption('-w, --workspace <id>', 'the workspace', idParser('workspace'))
    .requiredOption('--provider <name>', 'github, gitlab, slack, outline, forgejo or generic')
    .requiredOption('--source <url>', 'the provider server, e.g. https://github.com')
    .requiredOption('--kind <kind>', 'e.g. app_installation, webhook, pat, slack_team')
    .option('--external-id <id>', "the provider's id for it (installation id, team id)")
    .option('--route <json>', 'verified route, e.g. {"subject_prefixes":["repo:acme/"]}')
    .action((options: AddOptions) => withDatabase(options, async (db) => {
      print(options, await createConnection(db, {
        workspaceId: options.workspace, provider: options.provider, source: options.source,
        kind: options.kind, externalId: options.externalId ?? null, route: parseRoute(options.route),
      }));
    })));
  command.addCommand(operatorCommand('list', 'list connections with their subscriptions')
    .option('-w, --workspace <id>', 'only this workspace', idParser('workspace'))
    .action((options: OperatorOptions & { workspace?: string }) =>
      withDatabase(options, async (db) => print(options, await listConnections(db, options.workspace)))));
  for (const [name, state] of [['suspend', 'SUSPENDED'], ['pause', 'PAUSED'], ['resume', 'ACTIVE'], ['activate', 'ACTIVE']] as const) {
    command.addCommand(operatorCommand(name, `set a connection ${state}`)
      .argument('<id>', 'connection id', idParser('connection'))
      .action((id: string, options: OperatorOptions) =>
        withDatabase(options, async (db) => print(options, await setConnectionState(db, id, state)))));
  }
  command.addCommand(operatorCommand('rotate-secret', 'set a new webhook secret and print it (shown only now)')
    .argument('<id>', 'connection id', idParser('connection'))
    .option('--secret <secret>', 'use this secret instead of a random one')
    .option('--no-overlap', 'stop accepting the previous secret at once (it leaked), instead of after secret_overlap')
    .action((id: string, options: OperatorOptions & { secret?: string; overlap: boolean }) => withDatabase(options, async (db) => {
      const secret = await rotateConnectionSecret(
        db, await parseKeyRing(process.env.WHARF_SECRET_KEYS), id, options.secret, options.overlap);
      if (options.json) printJson({ connection_id: Number(id), secret });
      else process.stdout.write(`${secret}\n`);
    })));
  return command;
}
