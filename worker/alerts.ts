// The alert sender: a side job of a worker host. Every `everyMs` it tries the
// sender's lease in SQL (one host at a time holds it, as the redelivery
// sweeper's); the holder evaluates the alert rules (sql/99-alerts.sql), which
// records one alert per rule and thing it fires on, then delivers the due
// alerts and records each attempt; a failed one is retried by SQL's backoff.
//
// An HTTPS destination gets a Standard Webhooks request: the body
// {type, timestamp, data}, and `webhook-id` (the alert's own id, the same on
// every retry, so that a receiver deduplicates), `webhook-timestamp` and
// `webhook-signature` (`v1,` and the base64 HMAC-SHA256 of
// `<id>.<timestamp>.<body>` under the key the `whsec_` secret encodes). A
// Slack destination gets an incoming webhook's `{"text"}`. Neither carries a
// payload, a header or a secret: an alert's facts are names, ids, counts and
// times. Nothing is logged of a destination but its host. With the console's
// public URL, an alert about an issue or a stuck scope links to its page; a
// test alert (sent on request) says it is one, in its type and its text.
import type pg from 'pg';
import type { Logger } from 'pino';
import { Counter, Gauge } from 'prom-client';
import { classOf } from './classify.js';
import { workerRegistry } from './metrics.js';
import { signatureHeader } from './webhook-signature.js';
import { spread } from '../db/backoff.js';
import { runPeriodically, type Periodic } from './periodic.js';
import {
  deliveryGauges, dueAlerts, evaluateAlertRules, issueGauges, recordAlertAttempt, releaseAlertSender, takeAlertSender, type DueAlert,
} from './sql/alerts.js';

const registers = [workerRegistry];

export const alertDeliveriesTotal = new Counter({
  name: 'integration_consumer_alert_deliveries_total',
  help: 'Alert delivery attempts by this host, by outcome: delivered, retrying, failed (given up)',
  labelNames: ['outcome'] as const,
  registers,
});

export const issuesGauge = new Gauge({
  name: 'integration_consumer_issues',
  help: "The instance's issues by status (reported by the host holding the alert sender's lease)",
  labelNames: ['status'] as const,
  registers,
});

/** Connections named in the delivery gauge's `connection` label; the rest are 'other'. */
export const deliveryGaugeTop = 20;

export const deliveriesGauge = new Gauge({
  name: 'integration_consumer_deliveries_last_minute',
  help: "The instance's deliveries in the last complete minute, from the database, by connection (the 20 busiest by id, "
    + "'other', 'none'), outcome (accepted, refused, dropped) and reason (reported by the host holding the alert sender's lease)",
  labelNames: ['connection', 'outcome', 'reason'] as const,
  registers,
});


export interface AlertSenderOptions {
  pool: pg.Pool;
  /** This host's name in the lease (e.g. hostname:pid). */
  holder: string;
  /** How often the host tries (default 10 s, spread by a quarter either way). */
  everyMs?: number;
  /** How long the lease holds without a turn (default 60 s): another host takes over after. */
  leaseMs?: number;
  /** The first retry's delay; each later one doubles, up to an hour (default 5 s). */
  retryBaseMs?: number;
  /** How long one delivery may take (default 10 s). */
  timeoutMs?: number;
  /** Alerts sent per turn at most (default 50). */
  batch?: number;
  logger?: Pick<Logger, 'info' | 'warn'>;
  /** How requests are sent (default: global fetch). */
  fetch?: typeof fetch;
  /** The console's public base URL (WHARF_CONSOLE_URL, e.g. https://wharf.example.com/console): alerts link to their page there. */
  consoleUrl?: string;
}

export interface AlertTurn {
  /** Whether this host held the lease this turn. */
  held: boolean;
  created: number;
  delivered: number;
  failed: number;
}

export interface AlertSender {
  /** One turn now (unless one is running, whose result it then waits for). */
  runOnce(): Promise<AlertTurn>;
  /** Stops the schedule and gives the lease back. */
  stop(): Promise<void>;
}

/**
 * The console page of what an alert is about, under `consoleUrl`: its
 * issue's, or its workspace's stuck scopes; undefined without a console URL,
 * for a test, or for what has no page (a rate, the installation rows). Built
 * from ids alone.
 */
export function alertLink(alert: DueAlert, consoleUrl: string | undefined): string | undefined {
  if (!consoleUrl || alert.test || alert.workspace_id === null) return undefined;
  const base = `${consoleUrl.replace(/\/+$/, '')}/workspaces/${encodeURIComponent(String(alert.workspace_id))}`;
  const issueId = fact(alert.facts, 'issue', 'id');
  if ((alert.kind === 'issue_opened' || alert.kind === 'issue_reopened') && /^\d+$/.test(issueId)) return `${base}/issues/${issueId}`;
  if (alert.kind === 'stuck_scope') return `${base}/stuck`;
  return undefined;
}

/** The request an alert is sent as: its URL, headers and body. */
export function alertRequest(
  alert: DueAlert, now = new Date(), consoleUrl?: string,
): { url: string; headers: Record<string, string>; body: string } {
  const link = alertLink(alert, consoleUrl);
  if (alert.destination === 'slack') {
    return { url: alert.url, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: slackText(alert, link) }) };
  }
  if (!alert.secret) throw new Error(`alert ${alert.id}: a webhook destination without a secret`);
  const body = JSON.stringify({
    // A test's own type: a receiver that routes on the type never pages anyone for it.
    type: alert.test ? 'wharf.alert.test' : `wharf.alert.${alert.kind}`,
    timestamp: now.toISOString(),
    data: {
      alert_id: alert.id, rule: { id: alert.rule_id, name: alert.rule_name }, workspace_id: alert.workspace_id,
      kind: alert.kind, test: alert.test, created_at: alert.created_at, facts: alert.facts,
      ...(link !== undefined ? { link } : {}),
    },
  });
  const id = `alert_${alert.id}`;
  return {
    url: alert.url,
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': signatureHeader([alert.secret], id, now, body),
    },
    body,
  };
}

/** A field of an alert's facts (their shape depends on the kind), as text. */
function fact(facts: Record<string, unknown>, ...path: string[]): string {
  let value: unknown = facts;
  for (const key of path) value = typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;
  return value === undefined || value === null ? '' : String(value);
}

/** One line a person reads in Slack, ending with the link to its page when there is one. */
export function slackText(alert: DueAlert, link?: string): string {
  const f = (...path: string[]) => fact(alert.facts, ...path);
  if (alert.test) {
    return `[TEST] Wharf alert "${alert.rule_name}": a test of this ${alert.kind} rule, sent on request by ${f('requested_by')}; nothing is wrong.`;
  }
  const where = alert.workspace_id === null ? 'installation rows' : `workspace ${alert.workspace_id}`;
  const scope = alert.workspace_id === null ? '' : ` in ${where}`;
  const what = (() => {
    switch (alert.kind) {
      case 'issue_opened':
      case 'issue_reopened':
        return `issue ${f('issue', 'id')} ${alert.kind === 'issue_opened' ? 'opened' : 'reopened'} in ${where}: `
          + `${f('issue', 'provider')} ${f('issue', 'event_type')} failing with ${f('issue', 'error_class')} `
          + `(${f('issue', 'failures')} failures, ${f('issue', 'dead')} dead)`;
      case 'dead_letter_rate':
        return `${f('dead')} dead letters in the last ${f('window_seconds')}s (threshold ${f('threshold')})${scope}`;
      case 'oldest_due_age':
        return `an event has been due for ${f('age_seconds')}s unclaimed${scope}`;
      case 'stuck_scope':
        return `scope ${f('scope_key')} in ${where} is stuck behind event ${f('head', 'id')} `
          + `(${[f('head', 'state'), f('head', 'error_class')].filter(Boolean).join(', ')}) since ${f('waiting_since')}`;
      default:
        return alert.kind;
    }
  })();
  return `Wharf alert "${alert.rule_name}": ${what}${link !== undefined ? ` <${link}|Open in Wharf>` : ''}`;
}

export function startAlertSender(options: AlertSenderOptions): AlertSender {
  const everyMs = options.everyMs ?? 10_000;
  const leaseMs = options.leaseMs ?? 60_000;
  const retryBaseMs = options.retryBaseMs ?? 5_000;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const batch = options.batch ?? 50;
  const send = options.fetch ?? fetch;
  let token: string | null = null;
  let turn: Promise<AlertTurn> | undefined;

  async function deliver(alert: DueAlert): Promise<{ delivered: boolean; status: number | null; error: string | null }> {
    try {
      const request = alertRequest(alert, new Date(), options.consoleUrl);
      const response = await send(request.url, {
        method: 'POST', headers: request.headers, body: request.body,
        // A redirect is not followed: the rule names where alerts go.
        redirect: 'manual', signal: AbortSignal.timeout(timeoutMs),
      });
      await response.body?.cancel().catch(() => {});
      return { delivered: response.status >= 200 && response.status < 300, status: response.status, error: null };
    } catch (error) {
      const cause = error instanceof Error && error.cause !== undefined ? error.cause : error;
      return { delivered: false, status: null, error: classOf(cause) };
    }
  }

  async function run(): Promise<AlertTurn> {
    const result: AlertTurn = { held: false, created: 0, delivered: 0, failed: 0 };
    token = await takeAlertSender(options.pool, options.holder, leaseMs, token);
    if (!token) {
      deliveriesGauge.reset(); // the holder reports them; a host that lost the lease stops
      return result;
    }
    result.held = true;
    try {
      result.created = await evaluateAlertRules(options.pool, token);
      const gauges = await issueGauges(options.pool);
      for (const [status, count] of Object.entries(gauges.issues)) issuesGauge.set({ status }, count);
      // A series per label set of the last minute only: those of an earlier
      // minute that saw none go, rather than repeat a stale count.
      const deliveries = await deliveryGauges(options.pool, deliveryGaugeTop);
      deliveriesGauge.reset();
      for (const { connection, outcome, reason, count } of deliveries.deliveries) {
        deliveriesGauge.set({ connection, outcome, reason }, count);
      }
      for (const alert of await dueAlerts(options.pool, token, batch)) {
        const outcome = await deliver(alert);
        const state = await recordAlertAttempt(options.pool, token, alert.id, outcome, retryBaseMs);
        const host = safeHost(alert.url);
        alertDeliveriesTotal.inc({ outcome: outcome.delivered ? 'delivered' : state === 'failed' ? 'failed' : 'retrying' });
        if (outcome.delivered) result.delivered += 1;
        else {
          result.failed += 1;
          options.logger?.warn({ alert_id: alert.id, rule_id: alert.rule_id, host, status: outcome.status,
            error_class: outcome.error, state }, 'alert not delivered');
        }
      }
    } catch (error) {
      // WH412: another host took the lease over; this one tries again next turn.
      if ((error as { code?: string }).code === 'WH412') token = null;
      throw error;
    }
    return result;
  }

  function runOnce(): Promise<AlertTurn> {
    turn ??= run().finally(() => {
      turn = undefined;
    });
    return turn;
  }

  const periodic: Periodic = runPeriodically(() => spread(everyMs), async () => {
    await runOnce().catch((error: unknown) => {
      options.logger?.warn({ error_class: classOf(error) }, 'alert sender turn failed; trying again next turn');
    });
  });

  return {
    runOnce,
    async stop() {
      await periodic.stop();
      await turn?.catch(() => {});
      if (token) await releaseAlertSender(options.pool, token).catch(() => {});
      token = null;
    },
  };
}

/** A URL's host alone: what a log may say of a destination. */
function safeHost(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return 'invalid-url';
  }
}
