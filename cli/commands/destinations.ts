// `wharf destinations …`: a workspace's destinations (its own application's
// HTTPS endpoints that `wharf worker` forwards events to), their rules,
// deliveries, dead letters and replay, through the operator API as the
// console and the API do it. A signing secret is printed once, by create
// and rotate-secret; credentials are never printed (`-` as a credential's
// value reads it from stdin, so that it stays out of the shell's history).
// replay-all says how many dead letters match first and replays once
// confirmed (asked on a terminal, --yes in a script), with a progress bar.
import { Command, InvalidArgumentError, Option } from 'commander';
import { answerOf, type OperatorApiClient } from '../../operator/api/client.js';
import {
  deliveryStates, ratePeriods, type Credentials, type DeliveryReplayFilter, type Destination, type DestinationSpec,
  type RatePeriod, type RuleSpec,
} from '../../operator/sql/destinations.js';
import { printProgress } from '../progress-bar.js';
import { positiveInteger } from './option-parsers.js';
import {
  idParser, operatorCommand, printFields, printJson, printTable, usageError, withApi, type OperatorOptions,
} from './operator-support.js';
import { confirmOnTerminal } from '../confirm-on-terminal.js';

interface WorkspaceOptions extends OperatorOptions {
  workspace?: string;
  account?: string;
}

const destinationColumns = ['id', 'name', 'state', 'url', 'per_minute', 'success_rate', 'p50_ms', 'p99_ms', 'queued', 'dead'];
const destinationFields = ['id', 'name', 'url', 'state', 'paused_reason', 'consecutive_failures', 'failing_since', 'probe_at',
  'timeout_ms', 'rate_limit', 'rate_period', 'max_in_flight', 'ordered', 'headers', 'breaker_failures', 'breaker_minutes',
  'has_credentials', 'credentials_type', 'secret_rotating_until', 'created_at', 'updated_at',
  'queued', 'leased', 'dead', 'per_minute', 'delivered_last_hour', 'failed_last_hour', 'last_hour_sampled', 'success_rate', 'p50_ms', 'p99_ms'];
const ruleColumns = ['id', 'destination_id', 'connection_id', 'provider', 'event_types', 'subject_prefix', 'filter', 'forward_only'];
const deliveryColumns = ['id', 'event_id', 'state', 'attempt', 'failures', 'last_status', 'error_class', 'event_type', 'subject',
  'next_attempt_at', 'dead_at'];

function withWorkspace(command: Command): Command {
  return command.option('-w, --workspace <id>', 'the workspace', idParser('workspace'));
}

function workspaceOf(options: WorkspaceOptions): string {
  if (options.workspace === undefined) throw usageError('give --workspace <id>');
  return options.workspace;
}

function oneOf<T extends string>(name: string, values: readonly T[]): (value: string) => T {
  return (value) => {
    if (!(values as readonly string[]).includes(value)) throw new InvalidArgumentError(`${name} must be one of ${values.join(', ')}`);
    return value as T;
  };
}

/** A JSON object option (--filter). */
function jsonObject(name: string): (value: string) => Record<string, unknown> {
  return (value) => {
    try {
      const parsed: unknown = JSON.parse(value);
      if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
    } catch {
      // reported below
    }
    throw new InvalidArgumentError(`${name} must be a JSON object, e.g. '{"payload": {"action": "opened"}}'`);
  };
}

/** `--header 'Name: value'`, repeatable: an object of headers. */
function headerOption(value: string, previous: Record<string, string> | undefined): Record<string, string> {
  const at = value.indexOf(':');
  if (at <= 0) throw new InvalidArgumentError(`a header is 'Name: value', not ${JSON.stringify(value)}`);
  return { ...previous, [value.slice(0, at).trim()]: value.slice(at + 1).trim() };
}

function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/** A destination as a table row or a record: its figures flattened beside it. */
function flat(destination: Destination): Record<string, unknown> {
  const { stats, ...rest } = destination;
  const { queued_capped: queuedCapped, dead_capped: deadCapped, ...figures } = stats;
  const rate = stats.success_rate;
  return {
    ...rest, ...figures,
    // A count that stopped at its cap reads "10000+".
    queued: queuedCapped ? `${stats.queued}+` : stats.queued,
    dead: deadCapped ? `${stats.dead}+` : stats.dead,
    success_rate: rate === null ? null : `${Math.round(rate * 1000) / 10} %`,
    p50_ms: stats.latency_p50_ms, p99_ms: stats.latency_p99_ms,
  };
}

/** A 404 of the API as the usage error that names what is missing. */
function unknown(what: string, ws: string): (error: unknown) => never {
  return (error) => {
    if (error instanceof Error && 'status' in error && error.status === 404) throw usageError(`no ${what} in workspace ${ws}`);
    throw error;
  };
}

/** What the destination options given say, for create (all) or edit (what changes). */
interface SpecOptions {
  name?: string;
  url?: string;
  timeoutMs?: number;
  rateLimit?: number | false;
  ratePeriod?: RatePeriod;
  maxInFlight?: number;
  ordered?: boolean;
  header?: Record<string, string>;
  noHeaders?: boolean;
  breakerFailures?: number;
  breakerMinutes?: number;
}

function specOf(options: SpecOptions): DestinationSpec {
  const spec: DestinationSpec = {};
  if (options.name !== undefined) spec.name = options.name;
  if (options.url !== undefined) spec.url = options.url;
  if (options.timeoutMs !== undefined) spec.timeout_ms = options.timeoutMs;
  if (options.rateLimit !== undefined) spec.rate_limit = options.rateLimit === false ? null : options.rateLimit;
  if (options.ratePeriod !== undefined) spec.rate_period = options.ratePeriod;
  if (options.maxInFlight !== undefined) spec.max_in_flight = options.maxInFlight;
  if (options.ordered !== undefined) spec.ordered = options.ordered;
  if (options.header !== undefined) spec.headers = options.header;
  if (options.noHeaders) spec.headers = {};
  if (options.breakerFailures !== undefined) spec.breaker_failures = options.breakerFailures;
  if (options.breakerMinutes !== undefined) spec.breaker_minutes = options.breakerMinutes;
  return spec;
}

function withSpecOptions(command: Command, edit: boolean): Command {
  return command
    .option('--timeout-ms <ms>', 'how long one request may take, 100 to 60000 (default 10000)', positiveInteger)
    .option('--rate-limit <n>', 'deliveries per --rate-period, over every worker host together', positiveInteger)
    .option('--no-rate-limit', edit ? 'no rate limit any more' : 'no rate limit (the default)')
    .addOption(new Option('--rate-period <period>', `${ratePeriods.join(' or ')} (default second)`).argParser(oneOf('rate period', ratePeriods)))
    .option('--max-in-flight <n>', 'requests in flight at once, 1 to 1000 (default 10)', positiveInteger)
    .option('--ordered', 'one delivery at a time per scope, in order (the default)')
    .option('--unordered', 'deliveries of one scope may overlap')
    .option('--header <Name: value>', 'an extra non-secret header sent with every request (repeatable; replaces the headers)', headerOption)
    .option('--breaker-failures <n>', 'consecutive failed attempts that open the circuit breaker (default 20)', positiveInteger)
    .option('--breaker-minutes <n>', 'minutes of failing without a success that open it (default 10)', positiveInteger);
}

/** --ordered / --unordered as one value; both is a mistake. */
function orderedOf(options: { ordered?: boolean; unordered?: boolean }): boolean | undefined {
  if (options.ordered && options.unordered) throw usageError('give --ordered or --unordered, not both');
  return options.unordered ? false : options.ordered ? true : undefined;
}

/** Commander's --no-rate-limit sets rateLimit to false; without either flag, true (its default), which means "not given". */
function rateLimitOf(value: number | boolean | undefined): number | false | undefined {
  return value === true ? undefined : value;
}

/** A credential's value: as given, or read from stdin when it is `-`. */
async function secretValue(value: string): Promise<string> {
  if (value !== '-') return value;
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '');
  if (text === '') throw usageError('stdin held no credential');
  return text;
}

async function credentialsOf(options: { bearer?: string; basic?: string; header?: string }): Promise<Credentials> {
  const given = [options.bearer, options.basic, options.header].filter((value) => value !== undefined);
  if (given.length !== 1) throw usageError('give one of --bearer <token>, --basic <user:password> or --header \'Name: value\' (- reads the secret from stdin)');
  if (options.bearer !== undefined) return { type: 'bearer', token: await secretValue(options.bearer) };
  if (options.basic !== undefined) {
    const text = await secretValue(options.basic);
    const at = text.indexOf(':');
    if (at <= 0) throw usageError('basic credentials are user:password');
    return { type: 'basic', username: text.slice(0, at), password: text.slice(at + 1) };
  }
  const at = options.header!.indexOf(':');
  if (at <= 0) throw usageError("a credential header is 'Name: value' (value - reads it from stdin)");
  return { type: 'header', name: options.header!.slice(0, at).trim(), value: await secretValue(options.header!.slice(at + 1).trim()) };
}

function printDestination(destination: Destination & { secret?: string }, verb: string): void {
  process.stdout.write(`destination ${destination.id}: ${destination.name} → ${destination.url} (${destination.state}), ${verb}\n`);
  if (destination.secret) {
    process.stdout.write(`signing secret (shown once; your application verifies each request with it): ${destination.secret}\n`);
  }
}

interface RuleOptions {
  connection?: string;
  provider?: string;
  eventType?: string[];
  subjectPrefix?: string;
  filter?: Record<string, unknown>;
  forwardOnly?: boolean;
  clear?: string[];
}

const clearable = ['connection', 'provider', 'event-types', 'subject-prefix', 'filter'] as const;

function ruleSpecOf(options: RuleOptions): RuleSpec {
  const spec: RuleSpec = {};
  if (options.connection !== undefined) spec.connection_id = options.connection;
  if (options.provider !== undefined) spec.provider = options.provider;
  if (options.eventType !== undefined) spec.event_types = options.eventType;
  if (options.subjectPrefix !== undefined) spec.subject_prefix = options.subjectPrefix;
  if (options.filter !== undefined) spec.filter = options.filter;
  if (options.forwardOnly !== undefined) spec.forward_only = options.forwardOnly;
  for (const field of options.clear ?? []) {
    if (!(clearable as readonly string[]).includes(field)) throw usageError(`--clear takes one of ${clearable.join(', ')}`);
    const key = ({ connection: 'connection_id', provider: 'provider', 'event-types': 'event_types', 'subject-prefix': 'subject_prefix', filter: 'filter' } as const)[field as (typeof clearable)[number]];
    spec[key] = null;
  }
  return spec;
}

function withRuleOptions(command: Command): Command {
  return command
    .option('--connection <id>', 'only the events of this connection', idParser('connection'))
    .option('--provider <name>', 'only the events of this provider')
    .option('--event-type <pattern>', "an event type pattern, * for any run of characters ('pull_request.*'); repeatable", collect)
    .option('--subject-prefix <prefix>', 'only the events whose subject starts so')
    .option('--filter <json>', 'a filter over {payload, headers}, e.g. \'{"payload": {"action": {"$in": ["opened", "closed"]}}}\'', jsonObject('--filter'));
}

async function replayAll(
  api: OperatorApiClient, ws: string, id: string,
  options: WorkspaceOptions & { eventType?: string; errorClass?: string; deadAfter?: string; deadBefore?: string; yes?: boolean; batchSize?: number },
): Promise<void> {
  const filter: DeliveryReplayFilter = {
    ...(options.eventType !== undefined ? { event_type: options.eventType } : {}),
    ...(options.errorClass !== undefined ? { error_class: options.errorClass } : {}),
    ...(options.deadAfter !== undefined ? { dead_after: options.deadAfter } : {}),
    ...(options.deadBefore !== undefined ? { dead_before: options.deadBefore } : {}),
  };
  const param = { ws, id };
  // The count first, on stderr, like the question and the progress that follow.
  const { matched } = await answerOf(api.workspaces[':ws'].destinations[':id'].replays.count.$post({ param, json: filter }))
    .catch(unknown(`destination ${id}`, ws));
  const counted = `${matched} dead deliver${matched === 1 ? 'y matches' : 'ies match'}`;
  if (options.yes) process.stderr.write(`${counted}; replaying\n`);
  else if (!process.stdin.isTTY) {
    // A script that did not say --yes would otherwise wait for an answer nobody gives.
    process.stderr.write(`${counted}\n`);
    throw usageError('not replayed: no terminal to confirm on; add --yes to replay them without asking');
  } else if (!(await confirmOnTerminal(`${counted}. Replay ${matched === 1 ? 'it' : 'them'}? [y/N] `))) {
    throw usageError('not replayed');
  }
  let replayed = 0;
  printProgress(replayed, matched, 'replayed');
  // One batch a call, until one replays nothing or the count is reached (a
  // delivery that dies again meanwhile is not replayed twice by this run).
  while (replayed < matched) {
    const batch = Math.min(options.batchSize ?? 500, matched - replayed);
    const step = await answerOf(api.workspaces[':ws'].destinations[':id'].replays.$post({
      param, json: { ...filter, batch_size: batch, one_batch: true },
    }));
    if (step.replayed === 0) break;
    replayed += step.replayed;
    printProgress(replayed, matched, 'replayed');
  }
  if (replayed < matched) printProgress(matched, matched, 'replayed');
  if (options.json) printJson({ matched, replayed });
  else process.stdout.write(`destination ${id}: replayed ${replayed} of ${matched} dead deliveries\n`);
}

export function destinationsCommand(): Command {
  const command = new Command('destinations')
    .description("forward a workspace's events to your application: destinations, their rules, deliveries and dead letters");

  command.addCommand(withWorkspace(operatorCommand('list', "list the workspace's destinations with their state and figures"))
    .action((options: WorkspaceOptions) => withApi(options, async (api) => {
      const ws = workspaceOf(options);
      const destinations = await answerOf(api.workspaces[':ws'].destinations.$get({ param: { ws } }));
      if (options.json) return printJson(destinations);
      printTable(destinations.map(flat), destinationColumns);
    })));

  command.addCommand(withWorkspace(operatorCommand('show', 'one destination: settings, state, breaker and figures (never a secret)'))
    .argument('<id>', 'destination id', idParser('destination id'))
    .action((id: string, options: WorkspaceOptions) => withApi(options, async (api) => {
      const ws = workspaceOf(options);
      const found = await answerOf(api.workspaces[':ws'].destinations[':id'].$get({ param: { ws, id } }))
        .catch(unknown(`destination ${id}`, ws));
      if (options.json) return printJson(found);
      printFields(flat(found), destinationFields);
    })));

  command.addCommand(withSpecOptions(withWorkspace(operatorCommand('create', 'make a destination; its signing secret is printed once')), false)
    .requiredOption('--name <name>', 'what it is called, unique in the workspace')
    .requiredOption('--url <url>', 'https://… of your application')
    .action((options: WorkspaceOptions & SpecOptions & { unordered?: boolean; rateLimit?: number | boolean }) => withApi(options, async (api) => {
      const ws = workspaceOf(options);
      const json = specOf({ ...options, ordered: orderedOf(options), rateLimit: rateLimitOf(options.rateLimit) });
      const created = await answerOf(api.workspaces[':ws'].destinations.$post({ param: { ws }, json: json as Required<Pick<DestinationSpec, 'name' | 'url'>> & DestinationSpec }));
      if (options.json) return printJson(created);
      printDestination(created, 'created');
      process.stdout.write(`route events to it: wharf destinations rules add ${created.id} -w ${ws} --event-type '*'\n`);
    })));

  command.addCommand(withSpecOptions(withWorkspace(operatorCommand('edit', 'change a destination: only the options given')), true)
    .argument('<id>', 'destination id', idParser('destination id'))
    .option('--name <name>', 'a new name')
    .option('--url <url>', 'a new URL')
    .option('--no-headers', 'send no extra header any more')
    .action((id: string, options: WorkspaceOptions & SpecOptions & { unordered?: boolean; rateLimit?: number | boolean; headers?: boolean }) =>
      withApi(options, async (api) => {
        const ws = workspaceOf(options);
        const json = specOf({ ...options, ordered: orderedOf(options), rateLimit: rateLimitOf(options.rateLimit), noHeaders: options.headers === false });
        if (Object.keys(json).length === 0) throw usageError('nothing to change: give the options to change (see --help)');
        const edited = await answerOf(api.workspaces[':ws'].destinations[':id'].$patch({ param: { ws, id }, json }))
          .catch(unknown(`destination ${id}`, ws));
        if (options.json) return printJson(edited);
        printDestination(edited, 'changed');
      })));

  for (const [verb, state, description] of [
    ['pause', 'PAUSED', 'pause a destination: its deliveries are kept and wait'],
    ['resume', 'ACTIVE', 'resume a destination, paused or held by its circuit breaker'],
  ] as const) {
    command.addCommand(withWorkspace(operatorCommand(verb, description))
      .argument('<id>', 'destination id', idParser('destination id'))
      .option('--account <name>', 'who does it, recorded (default cli:<user>; with --api, the token)')
      .action((id: string, options: WorkspaceOptions) => withApi(options, async (api) => {
        const ws = workspaceOf(options);
        const route = api.workspaces[':ws'].destinations[':id'][verb];
        const changed = await answerOf(route.$post({ param: { ws, id } })).catch(unknown(`destination ${id}`, ws));
        if (options.json) return printJson(changed);
        printDestination(changed, state === 'PAUSED' ? 'paused' : 'resumed');
      })));
  }

  command.addCommand(withWorkspace(operatorCommand('rotate-secret', 'draw a new signing secret, printed once; the previous one keeps signing for 24 hours'))
    .argument('<id>', 'destination id', idParser('destination id'))
    .option('--no-overlap', 'cut the previous secret off at once (a leaked one)')
    .action((id: string, options: WorkspaceOptions & { overlap: boolean }) => withApi(options, async (api) => {
      const ws = workspaceOf(options);
      const rotated = await answerOf(api.workspaces[':ws'].destinations[':id']['rotate-secret'].$post({ param: { ws, id }, json: { overlap: options.overlap } }))
        .catch(unknown(`destination ${id}`, ws));
      if (options.json) return printJson(rotated);
      printDestination(rotated, options.overlap ? `secret rotated; the previous one signs too until ${rotated.secret_rotating_until}` : 'secret rotated; the previous one no longer signs');
    })));

  const credentials = new Command('credentials').description('credentials for an endpoint behind an API gateway, stored encrypted, never shown again');
  credentials.addCommand(withWorkspace(operatorCommand('set', 'set the credentials: one of --bearer, --basic or --header (- reads the secret from stdin)'))
    .argument('<id>', 'destination id', idParser('destination id'))
    .option('--bearer <token>', 'Authorization: Bearer <token>')
    .option('--basic <user:password>', 'Authorization: Basic …')
    .option('--header <Name: value>', 'an API-key header')
    .action((id: string, options: WorkspaceOptions & { bearer?: string; basic?: string; header?: string }) => withApi(options, async (api) => {
      const ws = workspaceOf(options);
      const json = await credentialsOf(options);
      const changed = await answerOf(api.workspaces[':ws'].destinations[':id'].credentials.$put({ param: { ws, id }, json }))
        .catch(unknown(`destination ${id}`, ws));
      if (options.json) return printJson(changed);
      printDestination(changed, `${changed.credentials_type} credentials set`);
    })));
  credentials.addCommand(withWorkspace(operatorCommand('clear', "clear a destination's credentials"))
    .argument('<id>', 'destination id', idParser('destination id'))
    .action((id: string, options: WorkspaceOptions) => withApi(options, async (api) => {
      const ws = workspaceOf(options);
      const changed = await answerOf(api.workspaces[':ws'].destinations[':id'].credentials.$delete({ param: { ws, id } }))
        .catch(unknown(`destination ${id}`, ws));
      if (options.json) return printJson(changed);
      printDestination(changed, 'credentials cleared');
    })));
  command.addCommand(credentials);

  command.addCommand(withWorkspace(operatorCommand('delete', 'delete a destination with its rules and deliveries'))
    .argument('<id>', 'destination id', idParser('destination id'))
    .action((id: string, options: WorkspaceOptions) => withApi(options, async (api) => {
      const ws = workspaceOf(options);
      const deleted = await answerOf(api.workspaces[':ws'].destinations[':id'].$delete({ param: { ws, id } }))
        .catch(unknown(`destination ${id}`, ws));
      if (options.json) return printJson(deleted);
      process.stdout.write(`destination ${id}: deleted\n`);
    })));

  const rules = new Command('rules').description('rules that route events to destinations');
  rules.addCommand(withWorkspace(operatorCommand('list', "list the workspace's rules, or one destination's"))
    .option('--destination <id>', "only this destination's rules", idParser('destination id'))
    .action((options: WorkspaceOptions & { destination?: string }) => withApi(options, async (api) => {
      const ws = workspaceOf(options);
      const list = await (options.destination === undefined
        ? answerOf(api.workspaces[':ws']['destination-rules'].$get({ param: { ws } }))
        : answerOf(api.workspaces[':ws'].destinations[':id'].rules.$get({ param: { ws, id: options.destination } }))
          .catch(unknown(`destination ${options.destination}`, ws)));
      if (options.json) return printJson(list);
      printTable(list, ruleColumns);
    })));
  rules.addCommand(withRuleOptions(withWorkspace(operatorCommand('add', 'route events to a destination; every criterion given must hold (none: every event)')))
    .argument('<destination-id>', 'destination id', idParser('destination id'))
    .option('--forward-only', "the workspace's own handlers do not receive the events this rule matches")
    .action((id: string, options: WorkspaceOptions & RuleOptions) => withApi(options, async (api) => {
      const ws = workspaceOf(options);
      const rule = await answerOf(api.workspaces[':ws'].destinations[':id'].rules.$post({ param: { ws, id }, json: ruleSpecOf(options) }))
        .catch(unknown(`destination ${id}`, ws));
      if (options.json) return printJson(rule);
      process.stdout.write(`rule ${rule.id}: routes to destination ${rule.destination_id}\n`);
    })));
  rules.addCommand(withRuleOptions(withWorkspace(operatorCommand('edit', 'change a rule: only the options given')))
    .argument('<rule-id>', 'rule id', idParser('rule id'))
    .option('--forward-only', "the workspace's own handlers do not receive the events this rule matches")
    .option('--no-forward-only', 'the handlers receive them too')
    .option('--clear <criterion>', `drop a criterion: ${clearable.join(', ')} (repeatable)`, collect)
    .action((id: string, options: WorkspaceOptions & RuleOptions) => withApi(options, async (api) => {
      const ws = workspaceOf(options);
      const json = ruleSpecOf(options);
      if (Object.keys(json).length === 0) throw usageError('nothing to change: give the options to change (see --help)');
      const rule = await answerOf(api.workspaces[':ws']['destination-rules'][':id'].$patch({ param: { ws, id }, json }))
        .catch(unknown(`rule ${id}`, ws));
      if (options.json) return printJson(rule);
      process.stdout.write(`rule ${rule.id}: changed\n`);
    })));
  rules.addCommand(withWorkspace(operatorCommand('delete', 'delete a rule'))
    .argument('<rule-id>', 'rule id', idParser('rule id'))
    .action((id: string, options: WorkspaceOptions) => withApi(options, async (api) => {
      const ws = workspaceOf(options);
      const deleted = await answerOf(api.workspaces[':ws']['destination-rules'][':id'].$delete({ param: { ws, id } }))
        .catch(unknown(`rule ${id}`, ws));
      if (options.json) return printJson(deleted);
      process.stdout.write(`rule ${id}: deleted\n`);
    })));
  command.addCommand(rules);

  command.addCommand(withWorkspace(operatorCommand('test-filter', 'whether a filter matches a stored event of the workspace; saves nothing'))
    .requiredOption('--filter <json>', 'the filter, e.g. \'{"payload": {"action": "opened"}}\'', jsonObject('--filter'))
    .requiredOption('--event <id>', 'a stored event of the workspace', idParser('event id'))
    .action((options: WorkspaceOptions & { filter: Record<string, unknown>; event: string }) => withApi(options, async (api) => {
      const ws = workspaceOf(options);
      const result = await answerOf(api.workspaces[':ws'].destinations['filter-test'].$post({ param: { ws }, json: { filter: options.filter, event_id: options.event } }))
        .catch(unknown(`event ${options.event}`, ws));
      if (options.json) return printJson(result);
      process.stdout.write(`event ${options.event}: ${result.matched ? 'matches' : 'does not match'}\n`);
    })));

  command.addCommand(withWorkspace(operatorCommand('deliveries', "a page of a destination's deliveries, newest first"))
    .argument('<id>', 'destination id', idParser('destination id'))
    .addOption(new Option('--state <state>', deliveryStates.join(', ')).argParser(oneOf('state', deliveryStates)))
    .option('--limit <n>', 'at most (default 50)')
    .option('--cursor <id>', "the previous page's next cursor", idParser('cursor'))
    .action((id: string, options: WorkspaceOptions & { state?: string; limit?: string; cursor?: string }) => withApi(options, async (api) => {
      const ws = workspaceOf(options);
      const query = { ...(options.state ? { state: options.state } : {}), ...(options.limit ? { limit: options.limit } : {}), ...(options.cursor ? { cursor: options.cursor } : {}) };
      const page = await answerOf(api.workspaces[':ws'].destinations[':id'].deliveries.$get({ param: { ws, id }, query }))
        .catch(unknown(`destination ${id}`, ws));
      if (options.json) return printJson(page);
      printTable(page.deliveries, deliveryColumns);
      if (page.next_cursor !== null) process.stdout.write(`older: --cursor ${page.next_cursor}\n`);
    })));

  command.addCommand(withWorkspace(operatorCommand('dead', "a page of a destination's dead letters, newest first"))
    .argument('<id>', 'destination id', idParser('destination id'))
    .option('--limit <n>', 'at most (default 50)')
    .option('--cursor <id>', "the previous page's next cursor", idParser('cursor'))
    .action((id: string, options: WorkspaceOptions & { limit?: string; cursor?: string }) => withApi(options, async (api) => {
      const ws = workspaceOf(options);
      const query = { ...(options.limit ? { limit: options.limit } : {}), ...(options.cursor ? { cursor: options.cursor } : {}) };
      const page = await answerOf(api.workspaces[':ws'].destinations[':id'].dead.$get({ param: { ws, id }, query }))
        .catch(unknown(`destination ${id}`, ws));
      if (options.json) return printJson(page);
      printTable(page.deliveries, deliveryColumns);
      if (page.next_cursor !== null) process.stdout.write(`older: --cursor ${page.next_cursor}\n`);
    })));

  command.addCommand(withWorkspace(operatorCommand('replay', 'send a DEAD delivery back to the queue, due at once (same webhook-id)'))
    .argument('<delivery-id>', 'delivery id', idParser('delivery id'))
    .option('--account <name>', 'who replays, recorded with the delivery (default cli:<user>; with --api, the token)')
    .action((id: string, options: WorkspaceOptions) => withApi(options, async (api) => {
      const ws = workspaceOf(options);
      const delivery = await answerOf(api.workspaces[':ws'].deliveries[':id'].replay.$post({ param: { ws, id } }))
        .catch((error: unknown) => {
          const failure = error as { status?: number; code?: string; details?: { state?: string } };
          if (failure.status === 404) throw usageError(`no delivery ${id} in workspace ${ws}`);
          if (failure.code === 'not_replayable') throw usageError(`delivery ${id} is ${failure.details?.state}; only a DEAD delivery can be replayed`);
          throw error;
        });
      if (options.json) return printJson(delivery);
      process.stdout.write(`replayed delivery ${id}: ${delivery.state}\n`);
    })));

  command.addCommand(withWorkspace(operatorCommand('replay-all', "replay a destination's dead letters that match, after saying how many"))
    .argument('<id>', 'destination id', idParser('destination id'))
    .option('--event-type <type>', 'only this event type')
    .option('--error-class <class>', 'only this error class')
    .option('--dead-after <time>', 'only those dead at or after this ISO time')
    .option('--dead-before <time>', 'only those dead before this ISO time')
    .option('--batch-size <n>', 'deliveries per transaction (default 500)', positiveInteger)
    .option('-y, --yes', 'replay them without asking (needed without a terminal, e.g. in a script)')
    .option('--account <name>', 'who replays, recorded with the deliveries (default cli:<user>; with --api, the token)')
    .action((id: string, options: WorkspaceOptions & { eventType?: string; errorClass?: string; deadAfter?: string; deadBefore?: string; yes?: boolean; batchSize?: number }) =>
      withApi(options, (api) => replayAll(api, workspaceOf(options), id, options))));

  return command;
}

