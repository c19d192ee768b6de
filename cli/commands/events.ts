// `wharf events list|show`.
import { Command, InvalidArgumentError } from 'commander';
import { parseLimit, parseState, parseSubject } from '../../operator/api/params.js';
import { type EventPage, listEvents, showEvent } from '../../operator/sql/operator.js';
import {
  describeOwner, idParser, operatorCommand, ownerOf, printFields, printJson, printTable, usageError,
  withDatabase, withOwnerOptions, type OperatorOptions, type OwnerOptions,
} from './operator-support.js';

export interface PageOptions extends OperatorOptions, OwnerOptions {
  subject?: string;
  limit?: string;
  cursor?: string;
}

export const eventColumns = [
  'id', 'state', 'provider', 'event_type', 'subject', 'attempt', 'failures', 'error_class', 'outcome', 'received_at',
];

/** --subject, --limit and --cursor, checked like the API checks them. */
export function withPageOptions(command: Command): Command {
  return withOwnerOptions(command)
    .option('--subject <subject>', 'only events about this subject')
    .option('--limit <n>', 'events per page (1-500, default 50)')
    .option('--cursor <id>', "the previous page's next cursor", idParser('cursor'));
}

export function pageFilter(options: PageOptions) {
  return {
    subject: parseSubject(options.subject),
    limit: parseLimit(options.limit),
    ...(options.cursor !== undefined ? { before: options.cursor } : {}),
  };
}

export function printPage(options: OperatorOptions, page: EventPage): void {
  if (options.json) return printJson(page);
  printTable(page.events, eventColumns);
  if (page.next_cursor !== null) process.stdout.write(`more: --cursor ${page.next_cursor}\n`);
}

const detailFields = [
  'id', 'workspace_id', 'provider', 'source', 'event_type', 'subject', 'delivery_key', 'state', 'attempt',
  'failures', 'next_attempt_at', 'error_class', 'outcome', 'received_at', 'handled_at', 'dead_at',
  'leased_by', 'leased_until', 'replayed_by', 'replayed_at',
];

export function eventsCommand(): Command {
  const command = new Command('events').description("inspect a workspace's inbox");
  command.addCommand(withPageOptions(operatorCommand('list', 'list events, newest first'))
    .option('--state <state>', 'QUEUED, LEASED, DONE or DEAD', (value) => {
      try {
        return parseState(value);
      } catch (error) {
        throw new InvalidArgumentError(error instanceof Error ? error.message : String(error));
      }
    })
    .action((options: PageOptions & { state?: ReturnType<typeof parseState> }) => withDatabase(options, async (db) => {
      const owner = ownerOf(options);
      printPage(options, await listEvents(db, owner, { ...pageFilter(options), ...(options.state ? { state: options.state } : {}) }));
    })));
  command.addCommand(withOwnerOptions(operatorCommand('show', 'show one event: payload, headers, attempts, steps'))
    .argument('<id>', 'event id', idParser('event id'))
    .action((id: string, options: OperatorOptions & OwnerOptions) => withDatabase(options, async (db) => {
      const owner = ownerOf(options);
      const event = await showEvent(db, owner, id);
      if (!event) throw usageError(`no event ${id} in ${describeOwner(owner)}`);
      if (options.json) return printJson(event);
      printFields(event, detailFields);
      process.stdout.write(`steps:   ${event.steps.map((step) => step.name).join(', ') || '-'}\n`);
      process.stdout.write(`headers: ${JSON.stringify(event.headers, null, 2)}\n`);
      process.stdout.write(`payload: ${JSON.stringify(event.payload, null, 2)}\n`);
    })));
  return command;
}
