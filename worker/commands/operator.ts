import type { Command } from 'commander';

/** Commands for operators: `start`, `serve`, workspaces, connections, events, replay, tokens. */
export function operatorCommands(): Command[] {
  return [];
}
