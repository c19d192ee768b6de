// The one way the edge turns a request away: logged with its reason (never
// the body or a secret), counted in webhook_rejected_total{reason}, and
// answered `{"error": "<reason>", "message": …}`.
import type { Context } from 'hono';
import type { EdgeLogger, EdgeMetrics } from './telemetry.js';

export type RejectionStatus = 400 | 401 | 404 | 405 | 413 | 503;

export type Reject = (
  c: Context,
  status: RejectionStatus,
  reason: string,
  message: string,
  facts?: Record<string, unknown>,
  headers?: Record<string, string>,
) => Response;

export function createReject(logger: EdgeLogger, metrics: EdgeMetrics): Reject {
  return (c, status, reason, message, facts = {}, headers = {}) => {
    metrics.rejected(reason);
    logger.warn({ event: 'webhook_rejected', reason, status, ...facts }, 'webhook rejected');
    return c.json({ error: reason, message }, status, headers);
  };
}
