// The calls of sql/99-alerts.sql the operator surface makes: alert rules of a
// workspace or of the instance, and the alerts they recorded with how their
// delivery went. A rule's URL and secret never come back out.
import { randomBytes } from 'node:crypto';
import type { Database } from '../../db/database.js';
import { callWharf } from './call-wharf.js';

export const alertKinds = ['issue_opened', 'issue_reopened', 'dead_letter_rate', 'oldest_due_age', 'stuck_scope'] as const;
export type AlertKind = (typeof alertKinds)[number];
export const alertDestinations = ['webhook', 'slack'] as const;
export type AlertDestination = (typeof alertDestinations)[number];

/** Whose rules: one workspace's, or the instance's (every workspace and the installation rows). */
export type AlertOwner = { workspaceId: string } | { instance: true };

export interface AlertRule {
  id: number;
  workspace_id: number | null;
  name: string;
  kind: AlertKind;
  threshold: number | null;
  window_seconds: number | null;
  destination: AlertDestination;
  /** The destination's host only: its URL may be a credential (Slack). */
  destination_host: string;
  created_by: string;
  created_at: string;
  /** Who edited it last, and when; null when never edited. */
  updated_by: string | null;
  updated_at: string | null;
}

export interface NewAlertRule {
  name: string;
  kind: AlertKind;
  threshold?: number;
  window_seconds?: number;
  destination: AlertDestination;
  url: string;
  /** A webhook's Standard Webhooks key (`whsec_…`); a random one when absent. */
  secret?: string;
}

export interface Alert {
  id: number;
  rule_id: number;
  rule_name: string;
  workspace_id: number | null;
  kind: AlertKind;
  /** Sent on request to try the rule's channel (sendTestAlert). */
  test: boolean;
  /** What it is about, in a few words: its issue, its stuck scope, or the measure. */
  about: string;
  issue_id: number | null;
  scope_key: string | null;
  facts: Record<string, unknown>;
  created_at: string;
  state: 'pending' | 'delivered' | 'failed';
  attempts: number;
  last_attempt_at: string | null;
  last_status: number | null;
  last_error: string | null;
  delivered_at: string | null;
}

/** A new Standard Webhooks key: `whsec_` and 32 random bytes in base64. */
export function generateAlertSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/**
 * Records a rule as `account`. A webhook rule without a secret gets a random
 * one, returned here once (give it to the receiver); otherwise no secret is
 * returned.
 */
export async function createAlertRule(
  db: Database, owner: AlertOwner, rule: NewAlertRule, account: string,
): Promise<AlertRule & { secret?: string }> {
  const generated = rule.destination === 'webhook' && rule.secret === undefined ? generateAlertSecret() : undefined;
  const args = [rule.name, rule.kind, rule.threshold ?? null, rule.window_seconds ?? null, rule.destination, rule.url,
    rule.secret ?? generated ?? null, account];
  const created = 'instance' in owner
    ? await callWharf<AlertRule>(db, 'wharf.create_instance_alert_rule($1, $2, $3, $4, $5, $6, $7, $8)', args)
    : await callWharf<AlertRule>(db, 'wharf.create_alert_rule($1, $2, $3, $4, $5, $6, $7, $8, $9)', [owner.workspaceId, ...args]);
  return generated ? { ...created, secret: generated } : created;
}

export function listAlertRules(db: Database, owner: AlertOwner): Promise<AlertRule[]> {
  return 'instance' in owner
    ? callWharf(db, 'wharf.list_instance_alert_rules()', [])
    : callWharf(db, 'wharf.list_alert_rules($1)', [owner.workspaceId]);
}

/** A rule as an edit states it: whole, but the URL and secret may be left out to keep them. */
export type AlertRuleEdit = Omit<NewAlertRule, 'url'> & { url?: string };

/**
 * Changes rule `id` of the owner in place as `account`, keeping its id and
 * its alerts (and its URL and secret when the edit leaves them out); null
 * when the owner has no such rule.
 */
export function editAlertRule(db: Database, owner: AlertOwner, id: string, rule: AlertRuleEdit, account: string): Promise<AlertRule | null> {
  return callWharf(db, 'wharf.edit_alert_rule($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)', [
    'instance' in owner ? null : owner.workspaceId, id, rule.name, rule.kind, rule.threshold ?? null, rule.window_seconds ?? null,
    rule.destination, rule.url ?? null, rule.secret ?? null, account]);
}

/** Records a test alert of rule `id` for the sender's next turn, as `account`; null when the owner has no such rule. */
export function sendTestAlert(db: Database, owner: AlertOwner, id: string, account: string): Promise<Alert | null> {
  return callWharf(db, 'wharf.send_test_alert($1, $2, $3)', ['instance' in owner ? null : owner.workspaceId, id, account]);
}

/** True when the owner had the rule (its alerts go with it). */
export function deleteAlertRule(db: Database, owner: AlertOwner, id: string): Promise<boolean> {
  return callWharf(db, 'wharf.delete_alert_rule($1, $2)', ['instance' in owner ? null : owner.workspaceId, id]);
}

/** The newest alerts of the owner's rules, with their delivery outcome. */
export function listAlerts(db: Database, owner: AlertOwner, limit: number): Promise<Alert[]> {
  return callWharf(db, 'wharf.list_alerts($1, $2)', ['instance' in owner ? null : owner.workspaceId, limit]);
}
