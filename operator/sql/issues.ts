// The calls of sql/97-issues.sql: failures grouped into issues, per
// workspace (or, for the instance admin, of the installation rows), and
// their status changes.
import type { Database } from '../../db/database.js';
import { callWharf } from './call-wharf.js';
import { isInstallation, type EventOwner, type EventPage } from './operator.js';

export const issueStatuses = ['open', 'acknowledged', 'resolved', 'ignored'] as const;
export type IssueStatus = (typeof issueStatuses)[number];

/** One issue (wharf.issue_summary): what failed, how often, since when, and who changed its status. */
export interface Issue {
  id: number;
  workspace_id: number | null;
  provider: string;
  /** '*' gathers a workspace's failures past the setting issue_limit. */
  event_type: string;
  error_class: string;
  /**
   * The top frames of the application's code where its failures were thrown
   * (`path:line:column function`), which with the class make the issue; []
   * for failures of workers that pass no frames, and for '*'.
   */
  frames: string[];
  status: IssueStatus;
  /** Who set the status; null when Wharf itself opened or reopened it. */
  status_by: string | null;
  status_at: string;
  first_seen_at: string;
  last_seen_at: string;
  /** Failed or expired leases counted. */
  failures: number;
  /** How many of them left their event DEAD. */
  dead: number;
  sample_event_id: number;
  reopened: number;
  reopened_at: string | null;
}

/** The owner's issues, latest seen first. */
export function listIssues(
  db: Database, owner: EventOwner, filter: { status?: IssueStatus; limit: number },
): Promise<Issue[]> {
  return isInstallation(owner)
    ? callWharf(db, 'wharf.list_installation_issues($1, $2)', [filter.status ?? null, filter.limit])
    : callWharf(db, 'wharf.list_issues($1, $2, $3)', [owner.workspaceId, filter.status ?? null, filter.limit]);
}

/** One issue of the workspace, or null when it has none with that id. */
export function showIssue(db: Database, workspaceId: string, id: string): Promise<Issue | null> {
  return callWharf(db, 'wharf.show_issue($1, $2)', [workspaceId, id]);
}

/** Sets an issue's status as `account`; the issue after, or null when the owner has none with that id. */
export function setIssueStatus(
  db: Database, owner: EventOwner, id: string, status: IssueStatus, account: string,
): Promise<Issue | null> {
  return isInstallation(owner)
    ? callWharf(db, 'wharf.set_installation_issue_status($1, $2, $3)', [id, status, account])
    : callWharf(db, 'wharf.set_issue_status($1, $2, $3, $4)', [owner.workspaceId, id, status, account]);
}

/** The events still failing with the issue's class (and frames), newest first; null when the workspace has no such issue. */
export function issueEvents(
  db: Database, workspaceId: string, id: string, page: { limit: number; before?: string },
): Promise<EventPage | null> {
  return callWharf(db, 'wharf.issue_events($1, $2, $3, $4)', [workspaceId, id, page.limit, page.before ?? null]);
}

/** An issue's failures and dead letters of one hour (wharf.issue_history). */
export interface IssueHour {
  at: string;
  failures: number;
  dead: number;
}

/** The issue's last `hours` (1..168), a row per hour, oldest first; null when the workspace has no such issue. */
export function issueHistory(db: Database, workspaceId: string, id: string, hours: number): Promise<IssueHour[] | null> {
  return callWharf(db, 'wharf.issue_history($1, $2, $3)', [workspaceId, id, hours]);
}

/** Failed or expired leases and dead letters of one minute (wharf.failure_history). */
export interface FailureMinute {
  at: string;
  failed: number;
  dead: number;
}

/** The last `hours` (1..24) of the workspace, a row per minute, oldest first. */
export function failureHistory(db: Database, workspaceId: string, hours: number): Promise<FailureMinute[]> {
  return callWharf(db, 'wharf.failure_history($1, $2)', [workspaceId, hours]);
}
