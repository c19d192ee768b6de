import type { Command } from 'commander';
import { migrateCommand } from './migrate.js';
import { workerCommand } from './worker.js';

/** Commands that run Wharf's processes: `migrate`, `worker`. */
export function runtimeCommands(): Command[] {
  return [migrateCommand(), workerCommand()];
}
