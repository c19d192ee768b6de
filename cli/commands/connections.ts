// `wharf connections add|list|suspend|pause|resume|activate|rotate-secret`.
import { Command, Option } from 'commander';
import { environment } from '../../db/environment.js';
import { providerNames, providers, type Provider } from '../../db/providers.js';
import { adapters } from '../../edge/adapters/index.js';
import { appVariables } from '../../edge/settings.js';
import { answerOf, type OperatorApiClient } from '../../operator/api/client.js';
import type { Connection } from '../../operator/sql/operator.js';
import {
  idParser, operatorCommand, printJson, printTable, usageError, withApi, type OperatorOptions,
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
  signature?: string;
}

function parseObject(text: string | undefined, option: string): Record<string, unknown> {
  if (text === undefined) return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw usageError(`${option} must be a JSON object`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw usageError(`${option} must be a JSON object`);
  return value as Record<string, unknown>;
}

/** --route, with --signature (a configured HMAC source's scheme) as its `signature`. */
function parseRoute(options: AddOptions): Record<string, unknown> {
  const route = parseObject(options.route, '--route');
  return options.signature === undefined ? route : { ...route, signature: parseObject(options.signature, '--signature') };
}

const stateVerbs = ['suspend', 'pause', 'resume', 'activate'] as const;
export type StateVerb = (typeof stateVerbs)[number];

/** Sets a connection's state through the API (resume and activate: ACTIVE). */
export function setConnectionState(api: OperatorApiClient, id: string, verb: StateVerb): Promise<Connection> {
  const connection = api.connections[':id'];
  const param = { id };
  switch (verb) {
    case 'suspend': return answerOf(connection.suspend.$post({ param }));
    case 'pause': return answerOf(connection.pause.$post({ param }));
    case 'resume': return answerOf(connection.resume.$post({ param }));
    case 'activate': return answerOf(connection.activate.$post({ param }));
  }
}

/** Where the new secret goes: the endpoint the provider posts to, and the provider's field for it. */
function secretDirections(connection: Connection | undefined, publicUrl: string): string {
  if (!connection) return '';
  const endpoint = `${publicUrl.replace(/\/+$/, '')}/hooks/${connection.provider}/${connection.id}`;
  const destination = adapters.get(connection.provider)?.secretDestination;
  return `Give it to ${connection.provider} (${connection.source}) now; it is not shown again.\n`
    + `  endpoint: ${endpoint}\n`
    + (destination ? `  secret:   ${destination}\n` : '');
}

/**
 * The source an app's deliveries carry is the edge's to say: a connection
 * of any other finds none of them (202, stored nowhere).
 */
function sourceHelp(): string {
  const apps = Object.entries(appVariables)
    .map(([provider, { source }]) => `${provider}: the app's ${source} (default ${environment[source].default})`);
  return `the provider's server, which its events are stored under, e.g. https://api.stripe.com; ${apps.join('; ')}`;
}

/**
 * Each kind with the providers that take it, from the registry, so that the
 * help names every provider's: `app_installation (github), …, hmac (hmac)`.
 */
function kindsHelp(): string {
  const byKind = new Map<string, Provider[]>();
  for (const name of providerNames) {
    for (const kind of providers[name].kinds) byKind.set(kind, [...(byKind.get(kind) ?? []), name]);
  }
  return [...byKind].map(([kind, names]) => `${kind} (${names.join(', ')})`).join(', ');
}

export function connectionsCommand(): Command {
  const command = new Command('connections').description('links between a provider and a workspace');
  command.addCommand(operatorCommand('add', 'create a connection (ACTIVE), or set the route of an existing one')
    .requiredOption('-w, --workspace <id>', 'the workspace', idParser('workspace'))
    .requiredOption('--provider <name>', providerNames.join(', '))
    .requiredOption('--source <url>', sourceHelp())
    .requiredOption('--kind <kind>', kindsHelp())
    .option('--external-id <id>', "the provider's id for it (installation id, team id)")
    .option('--route <json>', 'verified route, e.g. {"subject_prefixes":["repo:acme/"]}')
    .option('--signature <json>', 'provider hmac: the signature scheme (docs/configured-hmac.md), e.g. '
      + '{"header":"x-signature","prefix":"sha256=","algorithm":"sha256","encoding":"hex","signed":"{body}"}')
    .action((options: AddOptions) => withApi(options, async (api) => {
      print(options, await answerOf(api.workspaces[':ws'].connections.$post({
        param: { ws: options.workspace },
        json: {
          provider: options.provider, source: options.source, kind: options.kind,
          external_id: options.externalId ?? null, route: parseRoute(options),
        },
      })));
    })));
  command.addCommand(operatorCommand('list', 'list connections with their subscriptions')
    .option('-w, --workspace <id>', 'only this workspace', idParser('workspace'))
    .action((options: OperatorOptions & { workspace?: string }) => withApi(options, async (api) => {
      print(options, await (options.workspace === undefined
        ? answerOf(api.connections.$get())
        : answerOf(api.workspaces[':ws'].connections.$get({ param: { ws: options.workspace } }))));
    })));
  for (const verb of stateVerbs) {
    command.addCommand(operatorCommand(verb, `${verb} a connection`)
      .argument('<id>', 'connection id', idParser('connection'))
      .action((id: string, options: OperatorOptions) =>
        withApi(options, async (api) => print(options, await setConnectionState(api, id, verb)))));
  }
  command.addCommand(operatorCommand('rotate-secret', 'set a new webhook secret and print it (shown only now)')
    .argument('<id>', 'connection id', idParser('connection'))
    .option('--secret <secret>', 'use this secret instead of a random one')
    .option('--no-overlap', 'stop accepting the previous secret at once (it leaked), instead of after secret_overlap')
    .addOption(new Option('--public-url <url>', "the edge's public base URL, for the endpoint it prints")
      .env('WHARF_PUBLIC_URL').default(environment.WHARF_PUBLIC_URL.default))
    .action((id: string, options: OperatorOptions & { secret?: string; overlap: boolean; publicUrl: string }) =>
      withApi(options, async (api) => {
        const rotated = await answerOf(api.connections[':id']['rotate-secret'].$post({
          param: { id }, json: { ...(options.secret !== undefined ? { secret: options.secret } : {}), overlap: options.overlap },
        }));
        if (options.json) return printJson(rotated);
        process.stdout.write(`${rotated.secret}\n`);
        const connection = (await answerOf(api.connections.$get())).find((each) => String(each.id) === id);
        process.stderr.write(secretDirections(connection, options.publicUrl));
      })));
  return command;
}
