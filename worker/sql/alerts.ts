// The calls of sql/99-alerts.sql the alert sender makes, under its lease.
import type pg from 'pg';

/** An alert due for delivery, with its rule's destination (due_alerts). */
export interface DueAlert {
  id: number;
  rule_id: number;
  rule_name: string;
  workspace_id: number | null;
  kind: string;
  /** Sent on request to try the rule's channel (send_test_alert), about nothing that happened. */
  test: boolean;
  /** Names, ids, counts and times: never a payload, a header or a secret. */
  facts: Record<string, unknown>;
  created_at: string;
  attempts: number;
  destination: 'webhook' | 'slack';
  url: string;
  /** The receiver's Standard Webhooks key (`whsec_…`); null for Slack. */
  secret: string | null;
}

/** Takes or extends the sender's lease; its token, or null while another host holds it. */
export async function takeAlertSender(db: pg.Pool, holder: string, leaseMs: number, token: string | null): Promise<string | null> {
  const { rows } = await db.query<{ token: string | null }>(
    "SELECT wharf.take_alert_sender($1, $2 * interval '1 millisecond', $3) AS token", [holder, leaseMs, token]);
  return rows[0]?.token ?? null;
}

export async function releaseAlertSender(db: pg.Pool, token: string): Promise<void> {
  await db.query('SELECT wharf.release_alert_sender($1)', [token]);
}

/** Records the alerts the rules fire on now; how many. */
export async function evaluateAlertRules(db: pg.Pool, token: string): Promise<number> {
  const { rows } = await db.query<{ created: number }>('SELECT wharf.evaluate_alert_rules($1) AS created', [token]);
  return rows[0]?.created ?? 0;
}

export async function dueAlerts(db: pg.Pool, token: string, limit: number): Promise<DueAlert[]> {
  const { rows } = await db.query<{ alerts: DueAlert[] }>('SELECT wharf.due_alerts($1, $2) AS alerts', [token, limit]);
  return rows[0]?.alerts ?? [];
}

/** The outcome of one attempt: the alert's state after ('delivered', 'pending', 'failed'), or null when it was not pending. */
export async function recordAlertAttempt(
  db: pg.Pool, token: string, id: number,
  outcome: { delivered: boolean; status: number | null; error: string | null }, baseDelayMs: number,
): Promise<string | null> {
  const { rows } = await db.query<{ state: string | null }>(
    "SELECT wharf.record_alert_attempt($1, $2, $3, $4, $5, $6 * interval '1 millisecond') AS state",
    [token, id, outcome.delivered, outcome.status, outcome.error, baseDelayMs]);
  return rows[0]?.state ?? null;
}

/** One minute's deliveries of the instance, by connection (top N, 'other', 'none'), outcome and reason (wharf.delivery_gauges). */
export interface DeliveryGauges {
  minute: string;
  deliveries: Array<{ connection: string; outcome: 'accepted' | 'refused' | 'dropped'; reason: string; count: number }>;
}

/** The last complete minute's deliveries of the instance, the `top` busiest connections by name (wharf.delivery_gauges). */
export async function deliveryGauges(db: pg.Pool, top: number): Promise<DeliveryGauges> {
  const { rows } = await db.query<{ gauges: DeliveryGauges }>('SELECT wharf.delivery_gauges(NULL, $1) AS gauges', [top]);
  return rows[0]!.gauges;
}

/** The instance's issues by status (wharf.issue_gauges). */
export async function issueGauges(db: pg.Pool): Promise<{ issues: Record<string, number> }> {
  const { rows } = await db.query<{ gauges: { issues: Record<string, number> } }>(
    'SELECT wharf.issue_gauges() AS gauges');
  return rows[0]!.gauges;
}
