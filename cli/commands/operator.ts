import type { Command } from 'commander';
import { admissionsCommand } from './admissions.js';
import { alertsCommand } from './alerts.js';
import { connectionsCommand } from './connections.js';
import { deadCommand } from './dead.js';
import { eventsCommand } from './events.js';
import { issuesCommand, stuckCommand } from './issues.js';
import { pauseResumeCommands } from './pause-resume.js';
import { recoverCommand } from './recover.js';
import { replayCommand } from './replay.js';
import { secretsCommand } from './secrets.js';
import { subscriptionCommands } from './subscriptions.js';
import { tokensCommand } from './tokens.js';
import { workspacesCommand } from './workspaces.js';

/** Commands for operators: workspaces, connections, subscriptions, pause/resume, events, dead letters, admissions, issues, stuck scopes, alerts, replay, tokens, secrets. */
export function operatorCommands(): Command[] {
  return [
    workspacesCommand(),
    connectionsCommand(),
    ...subscriptionCommands(),
    ...pauseResumeCommands(),
    eventsCommand(),
    deadCommand(),
    admissionsCommand(),
    issuesCommand(),
    stuckCommand(),
    alertsCommand(),
    replayCommand(),
    recoverCommand(),
    tokensCommand(),
    secretsCommand(),
  ];
}
