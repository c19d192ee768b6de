// Whose rows a page shows: one workspace, or (for the instance admin) the
// installation rows that belong to no workspace. Checked before any query:
// a workspace token never reaches another workspace's pages, whatever the URL.
import type { Context } from 'hono';
import type { EventOwner } from '../sql/operator.js';
import type { ConsoleEnv } from './env.js';
import { ConsoleError } from './errors.js';

export interface Scope {
  owner: EventOwner;
  /** The workspace id, or undefined for installation rows. */
  workspaceId: string | undefined;
  /** This scope's pages, e.g. /console/workspaces/7. */
  base: string;
  /** A heading's name for it. */
  label: string;
}

const idPattern = /^[1-9][0-9]{0,18}$/;

export function isId(value: string | undefined): value is string {
  return value !== undefined && idPattern.test(value) && BigInt(value) <= 9223372036854775807n;
}

/** The workspace of `/workspaces/:ws/…`, after checking the signed-in token may reach it. */
export function workspaceScope(c: Context<ConsoleEnv>, basePath: string): Scope {
  const workspaceId = c.req.param('ws');
  if (!isId(workspaceId)) throw new ConsoleError(404, 'There is no such workspace.');
  const principal = c.get('principal');
  if (principal.kind === 'workspace' && principal.workspaceId !== workspaceId) {
    throw new ConsoleError(403, 'Your token does not reach that workspace.');
  }
  return { owner: { workspaceId }, workspaceId, base: `${basePath}/workspaces/${workspaceId}`, label: `Workspace ${workspaceId}` };
}

/** Installation rows (no workspace): the instance admin's only. */
export function installationScope(c: Context<ConsoleEnv>, basePath: string): Scope {
  if (c.get('principal').kind !== 'admin') throw new ConsoleError(403, 'Only the instance admin sees installation rows.');
  return { owner: { installation: true }, workspaceId: undefined, base: `${basePath}/installation`, label: 'Installation' };
}

/** Pages of admin-only writes (connection and workspace state, as the API reserves them). */
export function requireAdmin(c: Context<ConsoleEnv>): void {
  if (c.get('principal').kind !== 'admin') throw new ConsoleError(403, 'Only the instance admin may do that.');
}
