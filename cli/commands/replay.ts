// `wharf replay`: send a dead letter back to the queue, or, with --bulk,
// every dead letter of a workspace that matches the filters, followed with a
// progress bar until it is finished. A bulk replay says how many match first
// and starts once confirmed: asked on a terminal, --yes in a script.
import type { Command } from 'commander';
import { answerOf, type OperatorApiClient } from '../../operator/api/client.js';
import type { BulkReplay } from '../../operator/sql/bulk-replay.js';
import { printProgress } from '../progress-bar.js';
import {
  describeOwner, idParser, operatorCommand, ownerOf, printJson, usageError, withApi, withOwnerOptions,
  type OperatorOptions, type OwnerOptions,
} from './operator-support.js';
import { confirmOnTerminal } from '../confirm-on-terminal.js';

interface ReplayOptions extends OperatorOptions, OwnerOptions {
  force?: boolean;
  account?: string;
  bulk?: boolean;
  provider?: string;
  eventType?: string;
  subject?: string;
  errorClass?: string;
  deadAfter?: string;
  deadBefore?: string;
  receivedAfter?: string;
  receivedBefore?: string;
  payload?: string;
  headers?: string;
  yes?: boolean;
}

/** A --payload or --headers value: a JSON object. */
function jsonObjectOption(value: string | undefined, name: string): Record<string, unknown> | undefined {
  if (value === undefined) return undefined;
  try {
    const parsed: unknown = JSON.parse(value);
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // reported below
  }
  throw usageError(`${name} must be a JSON object, e.g. '{"repository":{"full_name":"acme/api"}}'`);
}

/** How often a bulk replay's progress is read. */
const followEveryMs = 250;

async function replayOne(api: OperatorApiClient, id: string, options: ReplayOptions): Promise<void> {
  const owner = ownerOf(options);
  const json = options.force ? { force: true } : {};
  const event = await (('installation' in owner)
    ? answerOf(api['installation-events'][':id'].replay.$post({ param: { id }, json }))
    : answerOf(api.workspaces[':ws'].events[':id'].replay.$post({ param: { ws: owner.workspaceId, id }, json }))
  ).catch((error: unknown) => {
    const failure = error as { status?: number; code?: string; details?: { state?: string } };
    if (failure.status === 404) throw usageError(`no event ${id} in ${describeOwner(owner)}`);
    if (failure.code === 'uncertain_outcome') {
      throw usageError(`event ${id} may have had an external effect; check it, then replay with --force`);
    }
    if (failure.code === 'not_replayable') {
      throw usageError(`event ${id} is ${failure.details?.state}; only a DEAD event can be replayed`);
    }
    throw error;
  });
  if (options.json) printJson(event);
  else process.stdout.write(`replayed event ${id}: ${event.state}, due ${event.next_attempt_at}\n`);
}

async function replayMany(api: OperatorApiClient, options: ReplayOptions): Promise<void> {
  const owner = ownerOf(options);
  if ('installation' in owner) throw usageError('--bulk replays the dead letters of one workspace: give --workspace');
  const filter = {
    provider: options.provider, event_type: options.eventType, subject: options.subject,
    error_class: options.errorClass, dead_after: options.deadAfter, dead_before: options.deadBefore,
    received_after: options.receivedAfter, received_before: options.receivedBefore,
    payload: jsonObjectOption(options.payload, '--payload'), headers: jsonObjectOption(options.headers, '--headers'),
  };
  const json = Object.fromEntries(Object.entries({ ...filter, force: options.force })
    .filter((entry) => entry[1] !== undefined));
  const param = { ws: owner.workspaceId };
  // The count first, on stderr, like the question and the progress that follow.
  const { matched } = await answerOf(api.workspaces[':ws'].replays.count.$post({ param, json }));
  const counted = `${matched} dead letter${matched === 1 ? ' matches' : 's match'}`;
  if (options.yes) process.stderr.write(`${counted}; replaying\n`);
  else if (!process.stdin.isTTY) {
    // A script that did not say --yes would otherwise wait for an answer nobody gives.
    process.stderr.write(`${counted}\n`);
    throw usageError('not replayed: no terminal to confirm on; add --yes to replay them without asking');
  } else if (!(await confirmOnTerminal(`${counted}. Replay ${matched === 1 ? 'it' : 'them'}? [y/N] `))) {
    throw usageError('not replayed');
  }
  let replay: BulkReplay = await answerOf(api.workspaces[':ws'].replays.$post({ param, json }));
  // On stderr, so that stdout holds only the result (a table or --json).
  const show = (step: BulkReplay) => printProgress(step.replayed, step.matched, 'replayed');
  show(replay);
  while (replay.state === 'running') {
    await new Promise((resolve) => setTimeout(resolve, followEveryMs));
    replay = await answerOf(api.workspaces[':ws'].replays[':id'].$get({ param: { ...param, id: String(replay.id) } }));
    show(replay);
  }
  if (options.json) printJson(replay);
  else {
    process.stdout.write(`bulk replay ${replay.id}: replayed ${replay.replayed} of ${replay.matched}`
      + `${replay.skipped > 0 ? ` (${replay.skipped} replayed or purged meanwhile)` : ''}`
      + `${replay.state === 'cancelled' ? `, cancelled by ${replay.cancelled_by}` : ''}\n`);
  }
}

export function replayCommand(): Command {
  return withOwnerOptions(operatorCommand('replay', 'send a DEAD event back to the queue, due at once; --bulk: every one that matches'))
    .argument('[id]', 'event id (without --bulk)', idParser('event id'))
    .option('--force', 'replay even when the outcome is uncertain (check the external effect first)')
    .option('--account <name>', 'who replays, recorded with the event (default cli:<user>; with --api, the token)')
    .option('--bulk', "replay every dead letter of the workspace that matches the filters below, in id order")
    .option('--provider <name>', 'with --bulk: only this provider')
    .option('--event-type <type>', 'with --bulk: only this event type')
    .option('--subject <subject>', 'with --bulk: only this subject')
    .option('--error-class <class>', 'with --bulk: only this error class')
    .option('--dead-after <time>', 'with --bulk: only those dead at or after this ISO time')
    .option('--dead-before <time>', 'with --bulk: only those dead before this ISO time')
    .option('--received-after <time>', 'with --bulk: only those received at or after this ISO time')
    .option('--received-before <time>', 'with --bulk: only those received before this ISO time')
    .option('--payload <json>', 'with --bulk: only those whose payload contains this JSON object')
    .option('--headers <json>', 'with --bulk: only those whose stored headers contain this JSON object')
    .option('-y, --yes', 'with --bulk: replay them without asking (needed without a terminal, e.g. in a script)')
    .action((id: string | undefined, options: ReplayOptions) => withApi(options, async (api) => {
      if (options.bulk) {
        if (id !== undefined) throw usageError('give an event id or --bulk, not both');
        return replayMany(api, options);
      }
      if (id === undefined) throw usageError('give the event id to replay (or --bulk with filters)');
      const filters = ['provider', 'eventType', 'subject', 'errorClass', 'deadAfter', 'deadBefore', 'receivedAfter',
        'receivedBefore', 'payload', 'headers'] as const;
      if (filters.some((filter) => options[filter] !== undefined)) {
        throw usageError('the filters select the events of a bulk replay: add --bulk (and drop the event id)');
      }
      return replayOne(api, id, options);
    }));
}
