// What one cell measured, as the report states it: the drain rate and the
// claim time with and without the fault, how soon the rate came back, how
// the receiver answered, and the dead tuples and sizes around the fault.
import { percentile } from '../stats.js';
import { totalBytes, totalDead, type MonitorSample } from './monitor.js';
import type { CellRun } from './rig.js';

export interface AnswerFigures {
  accepted: number;
  /** 503 with a Retry-After header. */
  refusedWithRetryAfter: number;
  /** Anything else that was not a 202: status → count ('503 without Retry-After', '500', …). */
  otherRefusals: Record<string, number>;
  /** No answer within the hang limit. */
  hangs: number;
  /** The connection failed (the receiver's process gone), by error code. */
  transportErrors: number;
  transportCodes: Record<string, number>;
  p99Ms: number;
  maxMs: number;
  /** Answers slower than the receiver's database deadline plus one second. */
  overDeadline: number;
}

export interface CellFigures {
  /** Events handled per second, mean over the baseline. */
  baselineRate: number;
  /** Deliveries acknowledged per second over the baseline. */
  baselineAcceptedRate: number;
  /** Mean over the fault. */
  faultRate: number;
  /** Lowest mean over a window of `windowS` seconds during the fault, against the baseline. */
  lowestWindowRatio: number;
  windowS: number;
  claimP50Baseline: number;
  claimP99Baseline: number;
  claimP99Fault: number;
  claimP99After: number;
  /** Claim statements per second over the baseline. */
  claimsPerSecond: number;
  /**
   * Seconds from the fault's end until the handled rate (2 s windows) was
   * back to 0.9× the baseline; 0 when it never fell below; null when it did
   * not come back before the load stopped.
   */
  recoveryS: number | null;
  /** Deliveries acknowledged per second during the fault, against those offered. */
  acceptedShareDuringFault: number;
  answers: AnswerFigures;
  dead: {
    baselineMax: number;
    peak: number;
    atRelease: number;
    end: number;
    /** ms after the fault's end until dead tuples were back at the baseline's level; null: not in the run. */
    backAfterMs: number | null;
    /** Autovacuum runs on the system's tables from the fault's end until then. */
    autovacuumsUntilBack: number | null;
  };
  bytes: { beforeFault?: number; atRelease?: number; peak?: number; end?: number };
}

const mean = (values: number[]): number => (values.length === 0 ? Number.NaN : values.reduce((a, b) => a + b, 0) / values.length);

/** The whole seconds inside [fromMs, toMs). */
function secondsIn(series: number[], fromMs: number, toMs: number): number[] {
  const out: number[] = [];
  for (let s = Math.ceil(fromMs / 1000); s + 1 <= Math.floor(toMs / 1000); s += 1) out.push(series[s] ?? 0);
  return out;
}

/**
 * Claims are placed by when they began: one that waited out a lock belongs to
 * the lock, though it answered after the release.
 */
function claimPercentile(run: CellRun, fromMs: number, toMs: number, p = 99): number {
  const durations = run.claims.filter(([at, ms]) => at - ms >= fromMs && at - ms < toMs).map(([, ms]) => ms).sort((a, b) => a - b);
  return percentile(durations, p);
}

/** The sample taken last before `atMs`, else the first. */
function sampleAt(samples: MonitorSample[], atMs: number): MonitorSample | undefined {
  return samples.filter((s) => s.at <= atMs).at(-1) ?? samples[0];
}

const autovacuums = (sample: MonitorSample): number => sample.tables.reduce((sum, t) => sum + t.autovacuums, 0);

export function answerFigures(run: CellRun, deadlineMs: number): AnswerFigures {
  const figures: AnswerFigures = {
    accepted: 0, refusedWithRetryAfter: 0, otherRefusals: {}, hangs: 0, transportErrors: 0, transportCodes: {}, p99Ms: 0, maxMs: 0,
    overDeadline: 0,
  };
  for (const answer of run.answers) {
    const { outcome } = answer;
    if (outcome.kind === 'accepted') figures.accepted += 1;
    else if (outcome.kind === 'no-answer') {
      if (outcome.reason === 'timeout') figures.hangs += 1;
      else {
        figures.transportErrors += 1;
        const code = `${outcome.code ?? 'error'}${outcome.reused ? ' on a reused socket' : ''}`;
        figures.transportCodes[code] = (figures.transportCodes[code] ?? 0) + 1;
      }
    } else if (outcome.status === 503 && outcome.retryAfter !== null) figures.refusedWithRetryAfter += 1;
    else {
      const key = outcome.status === 503 ? '503 without Retry-After' : String(outcome.status);
      figures.otherRefusals[key] = (figures.otherRefusals[key] ?? 0) + 1;
    }
    if (outcome.kind !== 'no-answer' && answer.ms > deadlineMs + 1000) figures.overDeadline += 1;
  }
  const times = run.answers.map((answer) => answer.ms).sort((a, b) => a - b);
  figures.p99Ms = percentile(times, 99);
  figures.maxMs = times.at(-1) ?? 0;
  return figures;
}

/** Deliveries acknowledged with answers that came in [fromMs, toMs). */
function acceptedIn(run: CellRun, fromMs: number, toMs: number): number {
  return run.answers.filter((a) => a.outcome.kind === 'accepted' && a.at >= fromMs && a.at < toMs).length;
}

export function cellFigures(run: CellRun, deadlineMs: number): CellFigures {
  const [b0, b1] = run.baseline;
  const [f0, f1] = run.fault;
  const baselineRate = mean(secondsIn(run.handled, b0, b1));
  const faultSeconds = secondsIn(run.handled, f0, f1);
  const windowS = Math.max(1, Math.min(10, faultSeconds.length));
  let lowest = Number.POSITIVE_INFINITY;
  for (let start = 0; start + windowS <= faultSeconds.length; start += 1) {
    lowest = Math.min(lowest, mean(faultSeconds.slice(start, start + windowS)));
  }
  let recoveryS: number | null = null;
  const firstAfter = Math.ceil(f1 / 1000);
  const during = secondsIn(run.handled, run.faultAskedAt, f1);
  const dipped = during.some((_, i) => mean(during.slice(i, i + 2)) < 0.9 * baselineRate);
  if (!dipped) recoveryS = 0;
  else {
    for (let s = firstAfter; s + 2 <= run.handled.length; s += 1) {
      if (mean(run.handled.slice(s, s + 2)) >= 0.9 * baselineRate) {
        recoveryS = Math.max(0, s - f1 / 1000);
        break;
      }
    }
  }
  const offered = secondsIn(run.offered, f0, f1).reduce((a, b) => a + b, 0);
  const acceptedDuring = acceptedIn(run, f0, f1);

  const baselineSamples = run.samples.filter((s) => s.at >= b0 && s.at < b1);
  const baselineMax = Math.max(0, ...baselineSamples.map(totalDead));
  const backLevel = baselineMax * 1.1 + 100;
  const afterRelease = run.samples.filter((s) => s.at > f1);
  const back = afterRelease.find((s) => totalDead(s) <= backLevel);
  const release = sampleAt(run.samples, f1);
  const before = sampleAt(run.samples, f0);
  const sizes = run.samples.map(totalBytes).filter((b): b is number => b !== undefined);
  const last = run.samples.at(-1);
  return {
    baselineRate,
    baselineAcceptedRate: acceptedIn(run, b0, b1) / Math.max(1, (b1 - b0) / 1000),
    faultRate: mean(faultSeconds),
    lowestWindowRatio: lowest / baselineRate,
    windowS,
    claimP50Baseline: claimPercentile(run, b0, b1, 50),
    claimP99Baseline: claimPercentile(run, b0, b1),
    claimP99Fault: claimPercentile(run, f0, f1),
    claimP99After: claimPercentile(run, f1, run.after[1]),
    claimsPerSecond: run.claims.filter(([at, ms]) => at - ms >= b0 && at - ms < b1).length / Math.max(1, (b1 - b0) / 1000),
    recoveryS,
    acceptedShareDuringFault: offered === 0 ? Number.NaN : acceptedDuring / offered,
    answers: answerFigures(run, deadlineMs),
    dead: {
      baselineMax,
      peak: Math.max(0, ...run.samples.filter((s) => s.at >= f0).map(totalDead)),
      atRelease: release ? totalDead(release) : Number.NaN,
      end: last ? totalDead(last) : Number.NaN,
      backAfterMs: back ? back.at - f1 : null,
      autovacuumsUntilBack: back && release ? autovacuums(back) - autovacuums(release) : null,
    },
    bytes: {
      ...(before && totalBytes(before) !== undefined ? { beforeFault: totalBytes(before)! } : {}),
      ...(release && totalBytes(release) !== undefined ? { atRelease: totalBytes(release)! } : {}),
      ...(sizes.length > 0 ? { peak: Math.max(...sizes) } : {}),
      ...(last && totalBytes(last) !== undefined ? { end: totalBytes(last)! } : {}),
    },
  };
}
