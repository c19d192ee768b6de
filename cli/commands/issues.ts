// `wharf issues list|show|ack|resolve|ignore|reopen` and `wharf stuck
// list|retry|dead-letter|pause`: the on-call engineer's first questions
// (what is failing, since when, how much; which scopes are held behind it)
// and the actions that answer them, through the operator API.
import { Command, InvalidArgumentError } from 'commander';
import { answerOf } from '../../operator/api/client.js';
import { issueStatuses, type IssueStatus } from '../../operator/sql/issues.js';
import type { ScopeActionName } from '../../operator/sql/stuck-scopes.js';
import { parseDuration } from '../duration.js';
import {
  describeOwner, idParser, operatorCommand, ownerOf, printFields, printJson, printTable, usageError, withApi,
  withOwnerOptions, type OperatorOptions, type OwnerOptions,
} from './operator-support.js';

interface IssueListOptions extends OperatorOptions, OwnerOptions {
  status?: IssueStatus;
  limit?: string;
}

const issueColumns = [
  'id', 'status', 'provider', 'event_type', 'error_class', 'failures', 'dead', 'first_seen_at', 'last_seen_at', 'status_by',
];

/** An issue's row with where it was thrown (its innermost frame), which tells two issues of one class apart. */
function withThrownAt<T extends { frames: string[] }>(issue: T): T & { thrown_at: string | null } {
  return { ...issue, thrown_at: issue.frames[0] ?? null };
}

function statusParser(value: string): IssueStatus {
  if (!(issueStatuses as readonly string[]).includes(value)) {
    throw new InvalidArgumentError(`status must be one of ${issueStatuses.join(', ')}`);
  }
  return value as IssueStatus;
}

/** The verbs that set a status, and the status each sets. */
const statusVerbs: [string, IssueStatus, string][] = [
  ['ack', 'acknowledged', 'acknowledge an issue: someone is on it'],
  ['resolve', 'resolved', 'resolve an issue; it reopens by itself when the failure returns'],
  ['ignore', 'ignored', 'ignore an issue: it keeps counting but stays ignored'],
  ['reopen', 'open', 'open an issue again'],
];

function notFound(error: unknown, what: string): never {
  if (error instanceof Error && 'status' in error && error.status === 404) throw usageError(`no ${what}`);
  throw error;
}

export function issuesCommand(): Command {
  const command = new Command('issues').description('failures grouped by provider, event type and error class');
  command.addCommand(withOwnerOptions(operatorCommand('list', 'list issues, latest seen first'))
    .option('--status <status>', `only issues of this status (${issueStatuses.join(', ')})`, statusParser)
    .option('--limit <n>', 'issues at most (1-1000, default 100)')
    .action((options: IssueListOptions) => withApi(options, async (api) => {
      const owner = ownerOf(options);
      const query = Object.fromEntries(Object.entries({ status: options.status, limit: options.limit })
        .filter((entry): entry is [string, string] => entry[1] !== undefined));
      const issues = await ('installation' in owner
        ? answerOf(api['installation-issues'].$get({ query }))
        : answerOf(api.workspaces[':ws'].issues.$get({ param: { ws: owner.workspaceId }, query })));
      if (options.json) return printJson(issues);
      printTable(issues.map(withThrownAt), [...issueColumns, 'thrown_at']);
    })));
  command.addCommand(operatorCommand('show', "show one issue of a workspace and its newest events")
    .requiredOption('-w, --workspace <id>', 'the workspace', idParser('workspace'))
    .argument('<id>', 'issue id', idParser('issue id'))
    .action((id: string, options: OperatorOptions & { workspace: string }) => withApi(options, async (api) => {
      const param = { ws: options.workspace, id };
      const issue = await answerOf(api.workspaces[':ws'].issues[':id'].$get({ param }))
        .catch((error: unknown) => notFound(error, `issue ${id} in workspace ${options.workspace}`));
      const events = await answerOf(api.workspaces[':ws'].issues[':id'].events.$get({ param, query: { limit: '20' } }));
      if (options.json) return printJson({ ...issue, events: events.events });
      printFields(issue, [...issueColumns, 'status_at', 'sample_event_id', 'reopened', 'reopened_at', 'frames']);
      process.stdout.write('events:\n');
      printTable(events.events, ['id', 'state', 'subject', 'attempt', 'failures', 'received_at', 'dead_at']);
    })));
  for (const [verb, status, description] of statusVerbs) {
    command.addCommand(withOwnerOptions(operatorCommand(verb, description))
      .argument('<id>', 'issue id', idParser('issue id'))
      .option('--account <name>', 'who does it, recorded with the issue (default cli:<user>; with --api, the token)')
      .action((id: string, options: OperatorOptions & OwnerOptions & { account?: string }) => withApi(options, async (api) => {
        const owner = ownerOf(options);
        const json = { status };
        const issue = await ('installation' in owner
          ? answerOf(api['installation-issues'][':id'].status.$post({ param: { id }, json }))
          : answerOf(api.workspaces[':ws'].issues[':id'].status.$post({ param: { ws: owner.workspaceId, id }, json }))
        ).catch((error: unknown) => notFound(error, `issue ${id} in ${describeOwner(owner)}`));
        if (options.json) return printJson(issue);
        process.stdout.write(`issue ${id}: ${issue.status} by ${issue.status_by}\n`);
      })));
  }
  return command;
}

interface StuckOptions extends OperatorOptions {
  workspace: string;
  olderThan?: number;
  limit?: string;
}

/** The verbs that act on a stuck scope's head, and the action each takes. */
const headVerbs: [string, ScopeActionName, string][] = [
  ['retry', 'retry_head', "retry a stuck scope's head now"],
  ['dead-letter', 'dead_letter_head', "move a stuck scope's head to the dead letters, so that its successors run"],
  ['pause', 'pause_connection', "pause the connection of a stuck scope's head"],
];

export function stuckCommand(): Command {
  const command = new Command('stuck').description('scopes held behind a head that has waited too long');
  command.addCommand(operatorCommand('list', 'list stuck scopes, oldest head first')
    .requiredOption('-w, --workspace <id>', 'the workspace', idParser('workspace'))
    .option('--older-than <duration>', 'heads waiting at least this long (e.g. 10m; default: the setting stuck_after)', (value) => {
      try {
        return Math.floor(parseDuration(value) / 1000);
      } catch (error) {
        throw new InvalidArgumentError(error instanceof Error ? error.message : String(error));
      }
    })
    .option('--limit <n>', 'scopes at most (1-500, default 100)')
    .action((options: StuckOptions) => withApi(options, async (api) => {
      const query = Object.fromEntries(Object.entries({
        older_than: options.olderThan === undefined ? undefined : String(options.olderThan), limit: options.limit,
      }).filter((entry): entry is [string, string] => entry[1] !== undefined));
      const scopes = await answerOf(api.workspaces[':ws']['stuck-scopes'].$get({ param: { ws: options.workspace }, query }));
      if (options.json) return printJson(scopes);
      printTable(scopes.map((scope) => ({
        scope_key: scope.scope_key, reason: scope.reason, head: scope.head.id, event_type: scope.head.event_type,
        error_class: scope.head.error_class, waiting_since: scope.waiting_since,
        behind: scope.behind_capped ? `${scope.behind}+` : scope.behind,
      })), ['scope_key', 'reason', 'head', 'event_type', 'error_class', 'waiting_since', 'behind']);
    })));
  for (const [verb, action, description] of headVerbs) {
    command.addCommand(operatorCommand(verb, description)
      .requiredOption('-w, --workspace <id>', 'the workspace', idParser('workspace'))
      .requiredOption('--scope <key>', 'the scope key, as `wharf stuck list` shows it')
      .argument('<head>', 'the id of the event heading the scope', idParser('event id'))
      .option('--account <name>', 'who does it, recorded with the action (default cli:<user>; with --api, the token)')
      .action((head: string, options: OperatorOptions & { workspace: string; scope: string }) => withApi(options, async (api) => {
        const result = await answerOf(api.workspaces[':ws']['stuck-scopes'].actions.$post({
          param: { ws: options.workspace }, json: { action, scope_key: options.scope, event_id: head },
        })).catch((error: unknown) => {
          const failure = error as { status?: number; code?: string; message?: string };
          if (failure.status === 404) throw usageError(`no event ${head} in scope ${options.scope} of workspace ${options.workspace}`);
          if (failure.status === 409) throw usageError(failure.message ?? 'refused');
          throw error;
        });
        if (options.json) return printJson(result);
        process.stdout.write(result.connection
          ? `paused connection ${result.connection.id}\n`
          : result.after_lease
            ? `${verb}: a handler retries event ${head} now; if that attempt fails, it goes to the dead letters\n`
            : `${verb}: event ${head} is ${result.event?.state}\n`);
      })));
  }
  return command;
}
