import type { Database } from '../../database.js';
import { callWharf } from '../call.js';

export interface Workspace {
  id: number;
  state: 'ACTIVE' | 'SUSPENDED' | 'DELETING';
  created_at: string;
  connections: number;
}

/** Creates workspace `id` ACTIVE when missing (wharf.upsert_workspace) and returns it. */
export async function createWorkspace(db: Database, id: string): Promise<Workspace> {
  await callWharf(db, 'wharf.upsert_workspace($1)', [id]);
  return (await showWorkspace(db, id)) as Workspace;
}

export function showWorkspace(db: Database, id: string): Promise<Workspace | null> {
  return callWharf(db, 'wharf.show_workspace($1)', [id]);
}

export function listWorkspaces(db: Database): Promise<Workspace[]> {
  return callWharf(db, 'wharf.list_workspaces()', []);
}

/** wharf.set_workspace_state; a 404 (P0002) for an unknown workspace. */
export async function setWorkspaceState(
  db: Database, id: string, state: 'ACTIVE' | 'SUSPENDED',
): Promise<Workspace> {
  await callWharf(db, 'wharf.set_workspace_state($1, $2)', [id, state]);
  return (await showWorkspace(db, id)) as Workspace;
}
