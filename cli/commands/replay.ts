// `wharf replay`: send a dead letter back to the queue.
import { userInfo } from 'node:os';
import type { Command } from 'commander';
import { replayEvent } from '../../operator/sql/replay-retention.js';
import {
  describeOwner, idParser, operatorCommand, ownerOf, printJson, usageError, withDatabase, withOwnerOptions,
  type OperatorOptions, type OwnerOptions,
} from './operator-support.js';

interface ReplayOptions extends OperatorOptions, OwnerOptions {
  force?: boolean;
  account?: string;
}

function defaultAccount(): string {
  try {
    return `cli:${userInfo().username}`;
  } catch {
    // A container user without a passwd entry.
    return 'cli';
  }
}

export function replayCommand(): Command {
  return withOwnerOptions(operatorCommand('replay', 'send a DEAD event back to the queue, due at once'))
    .argument('<id>', 'event id', idParser('event id'))
    .option('--force', 'replay even when the outcome is uncertain (check the external effect first)')
    .option('--account <name>', 'who replays, recorded with the event (default cli:<user>)')
    .action((id: string, options: ReplayOptions) => withDatabase(options, async (db) => {
      const owner = ownerOf(options);
      const result = await replayEvent(db, owner, id, options.account ?? defaultAccount(), options.force ?? false);
      if (!result.replayed) {
        switch (result.reason) {
          case 'not_found':
            throw usageError(`no event ${id} in ${describeOwner(owner)}`);
          case 'uncertain_outcome':
            throw usageError(`event ${id} may have had an external effect; check it, then replay with --force`);
          case 'not_replayable':
            throw usageError(`event ${id} is ${result.state}; only a DEAD event can be replayed`);
        }
      }
      if (options.json) printJson(result.event);
      else process.stdout.write(`replayed event ${id}: ${result.event.state}, due ${result.event.next_attempt_at}\n`);
    }));
}
