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

/** True when the owner had the rule (its alerts go with it). */
export function deleteAlertRule(db: Database, owner: AlertOwner, id: string): Promise<boolean> {
  return callWharf(db, 'wharf.delete_alert_rule($1, $2)', ['instance' in owner ? null : owner.workspaceId, id]);
}

/** The newest alerts of the owner's rules, with their delivery outcome. */
export function listAlerts(db: Database, owner: AlertOwner, limit: number): Promise<Alert[]> {
  return callWharf(db, 'wharf.list_alerts($1, $2)', ['instance' in owner ? null : owner.workspaceId, limit]);
}
