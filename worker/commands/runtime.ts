import type { Command } from 'commander';

/** Commands that run Wharf's processes: `migrate`, `worker`. */
export function runtimeCommands(): Command[] {
  return [];
}
