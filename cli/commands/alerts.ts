// `wharf alerts rules|create|edit|test|delete|sent`: who is told, and who
// was. Rules of a workspace (-w) or of the instance (--instance, an
// admin's), made, edited, tried and deleted through the operator API as the
// console and the API do it. A rule's URL and secret are never printed
// again; a secret Wharf generates is printed once, when the rule is made.
import { Command, InvalidArgumentError, Option } from 'commander';
import { answerOf } from '../../operator/api/client.js';
import type { OperatorApiClient } from '../../operator/api/client.js';
import {
  alertDestinations, alertKinds, type AlertDestination, type AlertKind, type AlertRuleEdit, type NewAlertRule,
} from '../../operator/sql/alerts.js';
import { durationOption, positiveInteger } from './option-parsers.js';
import {
  idParser, operatorCommand, printJson, printTable, usageError, withApi, type OperatorOptions,
} from './operator-support.js';

interface AlertOwnerOptions extends OperatorOptions {
  workspace?: string;
  instance?: boolean;
}

type Owner = { workspaceId: string } | { instance: true };

const ruleColumns = ['id', 'name', 'kind', 'threshold', 'window_seconds', 'destination', 'destination_host', 'created_by', 'created_at'];

function withAlertOwner(command: Command): Command {
  return command
    .option('-w, --workspace <id>', 'the workspace', idParser('workspace'))
    .option('--instance', "the instance's rules, over every workspace (an admin's)");
}

function ownerOf(options: AlertOwnerOptions): Owner {
  if (options.workspace !== undefined && options.instance) throw usageError('give either --workspace or --instance, not both');
  if (options.instance) return { instance: true };
  if (options.workspace !== undefined) return { workspaceId: options.workspace };
  throw usageError('give --workspace <id> or --instance');
}

function oneOf<T extends string>(name: string, values: readonly T[]): (value: string) => T {
  return (value) => {
    if (!(values as readonly string[]).includes(value)) throw new InvalidArgumentError(`${name} must be one of ${values.join(', ')}`);
    return value as T;
  };
}

function rulesOf(api: OperatorApiClient, owner: Owner) {
  return 'instance' in owner
    ? answerOf(api['alert-rules'].$get())
    : answerOf(api.workspaces[':ws']['alert-rules'].$get({ param: { ws: owner.workspaceId } }));
}

function noSuchRule(id: string, owner: Owner): Error {
  return usageError(`no alert rule ${id} in ${'instance' in owner ? 'the instance' : `workspace ${owner.workspaceId}`}`);
}

/** A 404 of the API as the usage error that names the rule and its owner. */
function unknownRule(id: string, owner: Owner): (error: unknown) => never {
  return (error) => {
    if (error instanceof Error && 'status' in error && error.status === 404) throw noSuchRule(id, owner);
    throw error;
  };
}

export function alertsCommand(): Command {
  const command = new Command('alerts').description('alert rules (who is told, and when) and the alerts they sent');

  command.addCommand(withAlertOwner(operatorCommand('rules', 'list alert rules')).action(
    (options: AlertOwnerOptions) => withApi(options, async (api) => {
      const rules = await rulesOf(api, ownerOf(options));
      if (options.json) return printJson(rules);
      printTable(rules, ruleColumns);
    })));

  command.addCommand(withAlertOwner(operatorCommand('create', 'make an alert rule; a generated webhook secret is printed once'))
    .requiredOption('--name <name>', 'what the rule is called in alerts')
    .addOption(new Option('--kind <kind>', `when it fires: ${alertKinds.join(', ')}`).argParser(oneOf('kind', alertKinds)).makeOptionMandatory())
    .addOption(new Option('--destination <to>', `${alertDestinations.join(' or ')}`).argParser(oneOf('destination', alertDestinations)).default('webhook'))
    .requiredOption('--url <url>', 'https (or http to a loopback address); for slack, the incoming webhook URL')
    .option('--threshold <n>', 'dead_letter_rate: dead letters within the window (events\' and deliveries\' to destinations)', positiveInteger)
    .addOption(durationOption('--window <duration>', 'dead_letter_rate: the window; oldest_due_age and stuck_scope: how long (e.g. 15m)'))
    .option('--secret <whsec>', 'webhook: the Standard Webhooks key (default: a random one, printed once)')
    .option('--account <name>', 'who makes it, recorded with the rule (default cli:<user>; with --api, the token)')
    .action((options: AlertOwnerOptions & {
      name: string; kind: AlertKind; destination: AlertDestination; url: string; threshold?: number; window?: number;
      secret?: string; account?: string;
    }) => withApi(options, async (api) => {
      const owner = ownerOf(options);
      const json: NewAlertRule = {
        name: options.name, kind: options.kind, destination: options.destination, url: options.url,
        ...(options.threshold !== undefined ? { threshold: options.threshold } : {}),
        ...(options.window !== undefined ? { window_seconds: Math.max(1, Math.round(options.window / 1000)) } : {}),
        ...(options.secret !== undefined ? { secret: options.secret } : {}),
      };
      const rule = await ('instance' in owner
        ? answerOf(api['alert-rules'].$post({ json }))
        : answerOf(api.workspaces[':ws']['alert-rules'].$post({ param: { ws: owner.workspaceId }, json })));
      if (options.json) return printJson(rule);
      process.stdout.write(`alert rule ${rule.id}: ${rule.name} (${rule.kind} to ${rule.destination} ${rule.destination_host})\n`);
      if (rule.secret) process.stdout.write(`secret (shown once, give it to the receiver): ${rule.secret}\n`);
    })));

  command.addCommand(withAlertOwner(operatorCommand('edit', 'change an alert rule in place: its id and the alerts it raised stay'))
    .argument('<id>', 'rule id', idParser('rule id'))
    .option('--name <name>', 'a new name')
    .addOption(new Option('--kind <kind>', `a new kind: ${alertKinds.join(', ')} (its parameters are then only those given)`)
      .argParser(oneOf('kind', alertKinds)))
    .addOption(new Option('--destination <to>', `${alertDestinations.join(' or ')} (with its --url)`).argParser(oneOf('destination', alertDestinations)))
    .option('--url <url>', 'a new URL (default: kept)')
    .option('--threshold <n>', 'dead_letter_rate: dead letters within the window (events\' and deliveries\' to destinations)', positiveInteger)
    .addOption(durationOption('--window <duration>', 'dead_letter_rate: the window; oldest_due_age and stuck_scope: how long (e.g. 15m)'))
    .option('--secret <whsec>', 'webhook: a new Standard Webhooks key (default: kept)')
    .option('--account <name>', 'who edits it, recorded with the rule (default cli:<user>; with --api, the token)')
    .action((id: string, options: AlertOwnerOptions & {
      name?: string; kind?: AlertKind; destination?: AlertDestination; url?: string; threshold?: number; window?: number; secret?: string;
    }) => withApi(options, async (api) => {
      const owner = ownerOf(options);
      // The API takes a rule whole: what is not given is the rule's as it is,
      // its parameters too unless the kind changes.
      const rule = (await rulesOf(api, owner)).find((candidate) => String(candidate.id) === id);
      if (!rule) throw noSuchRule(id, owner);
      const kind = options.kind ?? rule.kind;
      const sameKind = kind === rule.kind;
      const threshold = options.threshold ?? (sameKind ? rule.threshold : null);
      const windowSeconds = options.window !== undefined ? Math.max(1, Math.round(options.window / 1000)) : sameKind ? rule.window_seconds : null;
      const json: AlertRuleEdit = {
        name: options.name ?? rule.name, kind, destination: options.destination ?? rule.destination,
        ...(threshold !== null ? { threshold } : {}),
        ...(windowSeconds !== null ? { window_seconds: windowSeconds } : {}),
        ...(options.url !== undefined ? { url: options.url } : {}),
        ...(options.secret !== undefined ? { secret: options.secret } : {}),
      };
      const edited = await ('instance' in owner
        ? answerOf(api['alert-rules'][':id'].$put({ param: { id }, json }))
        : answerOf(api.workspaces[':ws']['alert-rules'][':id'].$put({ param: { ws: owner.workspaceId, id }, json }))
      ).catch(unknownRule(id, owner));
      if (options.json) return printJson(edited);
      process.stdout.write(`alert rule ${edited.id}: ${edited.name} (${edited.kind} to ${edited.destination} ${edited.destination_host}), edited\n`);
    })));

  command.addCommand(withAlertOwner(operatorCommand('test', "send a test alert through the rule's channel, marked as a test"))
    .argument('<id>', 'rule id', idParser('rule id'))
    .option('--account <name>', 'who asks, named in the test alert (default cli:<user>; with --api, the token)')
    .action((id: string, options: AlertOwnerOptions) => withApi(options, async (api) => {
      const owner = ownerOf(options);
      const sent = await ('instance' in owner
        ? answerOf(api['alert-rules'][':id'].test.$post({ param: { id } }))
        : answerOf(api.workspaces[':ws']['alert-rules'][':id'].test.$post({ param: { ws: owner.workspaceId, id } }))
      ).catch(unknownRule(id, owner));
      if (options.json) return printJson(sent);
      process.stdout.write(`test alert ${sent.id} of rule ${id} (${sent.rule_name}): a worker host sends it within seconds; \`wharf alerts sent\` shows how it went\n`);
    })));

  command.addCommand(withAlertOwner(operatorCommand('delete', 'delete an alert rule and the alerts it raised'))
    .argument('<id>', 'rule id', idParser('rule id'))
    .action((id: string, options: AlertOwnerOptions) => withApi(options, async (api) => {
      const owner = ownerOf(options);
      const deleted = await ('instance' in owner
        ? answerOf(api['alert-rules'][':id'].$delete({ param: { id } }))
        : answerOf(api.workspaces[':ws']['alert-rules'][':id'].$delete({ param: { ws: owner.workspaceId, id } }))
      ).catch(unknownRule(id, owner));
      if (options.json) return printJson(deleted);
      process.stdout.write(`alert rule ${id}: deleted\n`);
    })));

  command.addCommand(withAlertOwner(operatorCommand('sent', 'list the newest alerts and how their delivery went'))
    .option('--limit <n>', 'alerts at most (default 50)')
    .action((options: AlertOwnerOptions & { limit?: string }) => withApi(options, async (api) => {
      const owner = ownerOf(options);
      const query = options.limit === undefined ? {} : { limit: options.limit };
      const alerts = await ('instance' in owner
        ? answerOf(api.alerts.$get({ query }))
        : answerOf(api.workspaces[':ws'].alerts.$get({ param: { ws: owner.workspaceId }, query })));
      if (options.json) return printJson(alerts);
      printTable(alerts, ['id', 'created_at', 'rule_name', 'kind', 'about', 'test', 'state', 'attempts', 'last_status', 'last_error', 'delivered_at']);
    })));
  return command;
}
