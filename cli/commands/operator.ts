import type { Command } from 'commander';
import { admissionsCommand } from './admissions.js';
import { connectionsCommand } from './connections.js';
import { deadCommand } from './dead.js';
import { eventsCommand } from './events.js';
import { recoverCommand } from './recover.js';
import { replayCommand } from './replay.js';
import { secretsCommand } from './secrets.js';
import { subscriptionCommands } from './subscriptions.js';
import { tokensCommand } from './tokens.js';
import { workspacesCommand } from './workspaces.js';

/** Commands for operators: workspaces, connections, subscriptions, events, dead letters, replay, tokens, secrets. */
export function operatorCommands(): Command[] {
  return [
    workspacesCommand(),
    connectionsCommand(),
    ...subscriptionCommands(),
    eventsCommand(),
    deadCommand(),
    admissionsCommand(),
    replayCommand(),
    recoverCommand(),
    tokensCommand(),
    secretsCommand(),
  ];
}
