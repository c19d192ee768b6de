// The GitHub redelivery sweeper: GitHub never redelivers a failed webhook
// delivery by itself, so this part lists a GitHub App's deliveries and asks
// GitHub to redeliver every failed one the inbox has not stored. Its state is
// in SQL (sql/85-redelivery.sql); it imports nothing of Wharf but db/.
export { checkAppName, parseAppList, readGitHubAppConfig, RecoveryConfigError, type GitHubAppConfig, type RecoveryEnv } from './config.js';
export {
  createGitHubAppClient, GitHubApiError, type GitHubAppClient, type GitHubClientOptions, type GitHubFailure, type HookDelivery,
  type NoAnswerCause,
} from './github.js';
export { redeliveryMetrics, type RedeliveryMetrics } from './metrics.js';
export { defaultSweepEveryMs, startRedeliverySweeps, type SweepSchedule, type SweepScheduleOptions } from './schedule.js';
export { sweepStatus, type SweepKey, type SweepStatus } from './sql.js';
export { defaultSweepLeaseMs, errorKind, notSwept, silentLogger, sweepApp, type GaveUp, type RecoveryLogger, type SweepOptions, type SweepProgress, type SweepResult } from './sweep.js';
