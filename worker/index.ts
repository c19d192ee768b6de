// The worker library: what a host application imports.
export { createWorker, type ForwardOptions, type Worker, type WorkerEvents, type WorkerOptions } from './create-worker.js';
export type { ForwardedDelivery, ForwardOutcome } from './forwarding/forward-loop.js';
export { webhookId } from './forwarding/delivery-request.js';
export type { Handler, HandlerContext, HandlerMap, InboxEvent } from './handlers.js';
export type { GitLabEventMap, PayloadOf, ProviderPayloads, SlackEventEnvelope, SlackEventMap, TypedHandlerKey } from './provider-payloads.js';
export { OutcomeUncertainError, PayloadParsingError, TransientError, HandlerTimeoutError, LeaseLostError } from './errors.js';
export { classifyFailure, type Classification, type FailureKind } from './classify.js';
export type { WorkerSettings } from './settings.js';
export type { RunOutcome } from './event-run.js';
export type { RetentionResult } from './retention.js';
export { workerRegistry } from './metrics.js';
// A pg Pool that follows a primary through a failover: for `pool` and `handlerPool`.
export { createPool, type PoolOptions } from '../db/pool.js';
export { startMetricsServer, type MetricsServer } from './metrics-server.js';
export { startAlertSender, type AlertSender, type AlertSenderOptions, type AlertTurn } from './alerts.js';
