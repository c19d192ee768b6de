// Whose rows a page shows: one workspace, or (for the instance admin) the
// installation rows that belong to no workspace. Checked before any query:
// a workspace token never reaches another workspace's pages, whatever the URL.
import type { Context } from 'hono';
import { isIdText } from '../api/params.js';
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

/** The scope of one workspace's pages. */
export type WorkspaceScope = Scope & { workspaceId: string };

/** The workspace of `/workspaces/:ws/…`, after checking the signed-in token may reach it. */
export function workspaceScope(c: Context<ConsoleEnv>, basePath: string): WorkspaceScope {
  const workspaceId = c.req.param('ws');
  if (!isIdText(workspaceId)) throw new ConsoleError(404, 'There is no such workspace.');
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
