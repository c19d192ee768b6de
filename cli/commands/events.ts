// `wharf events list|show`.
import { Command, InvalidArgumentError } from 'commander';
import { answerOf, type OperatorApiClient } from '../../operator/api/client.js';
import { parseState } from '../../operator/api/params.js';
import type { EventOwner, EventPage } from '../../operator/sql/operator.js';
import {
  describeOwner, idParser, operatorCommand, ownerOf, printFields, printJson, printTable, usageError,
  withApi, withOwnerOptions, type OperatorOptions, type OwnerOptions,
} from './operator-support.js';

export interface PageOptions extends OperatorOptions, OwnerOptions {
  subject?: string;
  provider?: string;
  eventType?: string;
  receivedAfter?: string;
  receivedBefore?: string;
  limit?: string;
  cursor?: string;
  payload?: string;
  headers?: string;
}

export const eventColumns = [
  'id', 'state', 'provider', 'event_type', 'subject', 'attempt', 'failures', 'error_class', 'outcome', 'received_at',
];

/** The filters and paging of event lists; the API checks them. */
export function withPageOptions(command: Command): Command {
  return withOwnerOptions(command)
    .option('--subject <subject>', 'only events about this subject')
    .option('--provider <name>', 'only events of this provider')
    .option('--event-type <type>', 'only events of this type')
    .option('--received-after <time>', 'only events received at or after this ISO time')
    .option('--received-before <time>', 'only events received before this ISO time')
    .option('--limit <n>', 'events per page (1-500, default 50)')
    .option('--cursor <id>', "the previous page's next cursor", idParser('cursor'));
}

/** The JSON containment search of `wharf events list` (the API checks the JSON). */
export function withSearchOptions(command: Command): Command {
  return command
    .option('--payload <json>', 'only events whose payload contains this JSON object, e.g. \'{"repository":{"full_name":"acme/api"}}\'')
    .option('--headers <json>', 'only events whose stored headers contain this JSON object');
}

/** The query the API takes for these options. */
export function pageQuery(options: PageOptions & { state?: string }) {
  const query = {
    state: options.state, subject: options.subject, provider: options.provider, event_type: options.eventType,
    received_after: options.receivedAfter, received_before: options.receivedBefore, limit: options.limit,
    cursor: options.cursor, payload: options.payload, headers: options.headers,
  };
  return Object.fromEntries(Object.entries(query).filter((entry): entry is [string, string] => entry[1] !== undefined));
}

export function printPage(options: OperatorOptions, page: EventPage): void {
  if (options.json) return printJson(page);
  printTable(page.events, eventColumns);
  if (page.next_cursor !== null) process.stdout.write(`more: --cursor ${page.next_cursor}\n`);
}

/** A page of events (or, with dead, dead letters) of the owner. */
export function listEventPage(api: OperatorApiClient, owner: EventOwner, query: Record<string, string>, dead = false) {
  if ('installation' in owner) {
    return answerOf(dead ? api['installation-events'].dead.$get({ query }) : api['installation-events'].$get({ query }));
  }
  const param = { ws: owner.workspaceId };
  return answerOf(dead ? api.workspaces[':ws'].dead.$get({ param, query }) : api.workspaces[':ws'].events.$get({ param, query }));
}

const detailFields = [
  'id', 'workspace_id', 'provider', 'source', 'event_type', 'subject', 'delivery_key', 'state', 'attempt',
  'failures', 'next_attempt_at', 'error_class', 'outcome', 'received_at', 'handled_at', 'dead_at',
  'leased_by', 'leased_until', 'replayed_by', 'replayed_at',
];

export function eventsCommand(): Command {
  const command = new Command('events').description("inspect a workspace's inbox");
  command.addCommand(withSearchOptions(withPageOptions(operatorCommand('list', 'list events, newest first')))
    .option('--state <state>', 'QUEUED, LEASED, DONE or DEAD', (value) => {
      try {
        return parseState(value);
      } catch (error) {
        throw new InvalidArgumentError(error instanceof Error ? error.message : String(error));
      }
    })
    .action((options: PageOptions & { state?: string }) => withApi(options, async (api) => {
      printPage(options, await listEventPage(api, ownerOf(options), pageQuery(options)));
    })));
  command.addCommand(withOwnerOptions(operatorCommand('show', 'show one event: payload, headers, attempts, steps'))
    .argument('<id>', 'event id', idParser('event id'))
    .action((id: string, options: OperatorOptions & OwnerOptions) => withApi(options, async (api) => {
      const owner = ownerOf(options);
      const event = await ('installation' in owner
        ? answerOf(api['installation-events'][':id'].$get({ param: { id } }))
        : answerOf(api.workspaces[':ws'].events[':id'].$get({ param: { ws: owner.workspaceId, id } }))
      ).catch((error: unknown) => {
        if (error instanceof Error && 'status' in error && error.status === 404) {
          throw usageError(`no event ${id} in ${describeOwner(owner)}`);
        }
        throw error;
      });
      if (options.json) return printJson(event);
      printFields(event, detailFields);
      process.stdout.write('attempts:\n');
      printTable(event.attempts, ['attempt', 'epoch', 'worker', 'started_at', 'ended_at', 'ended', 'error_class']);
      process.stdout.write(`steps:   ${event.steps.map((step) => step.name).join(', ') || '-'}\n`);
      process.stdout.write(`headers: ${JSON.stringify(event.headers, null, 2)}\n`);
      process.stdout.write(`payload: ${JSON.stringify(event.payload, null, 2)}\n`);
    })));
  return command;
}
