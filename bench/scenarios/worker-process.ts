// One worker host of a scenario, in a process of its own, as users run one:
// Wharf's createWorker (the worker library) or graphile-worker's run() with
// its local queue (bench/systems/graphile.ts). The handler writes two business
// rows, each in a step of its own (bench/scenarios/effects.ts): Wharf's
// ctx.step fences each with the lease; graphile-worker has no steps, so its
// task writes them one after the other. It reports on stdout, one JSON line
// each: `{"ready":true}` once it drains, then every second `{"claims": [[at,
// ms], …]}`, the claim statements it made (claim-timing.ts). SIGTERM stops it gracefully;
// it exits 0 when the stop went well.
//
// Environment: SCENARIO_SYSTEM (wharf | graphile), DATABASE_URL,
// SCENARIO_CONCURRENCY, SCENARIO_LOCAL_QUEUE, SCENARIO_STEP_PAUSE_MS.
import pg from 'pg';
import { pino } from 'pino';
import { createWorker, type HandlerMap } from '../../worker/index.js';
import { readMark } from '../payload.js';
import { startGraphileWorker } from '../systems/graphile.js';
import { claimStatement, timeClaims } from './claim-timing.js';
import { effectSteps, writeEffect } from './effects.js';

const system = process.env.SCENARIO_SYSTEM;
const databaseUrl = process.env.DATABASE_URL;
if ((system !== 'wharf' && system !== 'graphile') || !databaseUrl) {
  throw new Error('worker-process needs SCENARIO_SYSTEM=wharf|graphile and DATABASE_URL');
}
const concurrency = Number(process.env.SCENARIO_CONCURRENCY ?? 8);
const localQueue = Number(process.env.SCENARIO_LOCAL_QUEUE ?? 0);
const stepPauseMs = Number(process.env.SCENARIO_STEP_PAUSE_MS ?? 0);

/** [when it answered (epoch ms), how long it took (ms)] of each claim since the last report. */
let claims: Array<[number, number]> = [];
timeClaims(claimStatement[system], (ms) => claims.push([Date.now(), Math.round(ms * 100) / 100]));
const say = (line: object): void => {
  process.stdout.write(`${JSON.stringify(line)}\n`);
};

const pause = (): Promise<void> | undefined =>
  stepPauseMs > 0 ? new Promise((resolve) => setTimeout(resolve, stepPauseMs)) : undefined;

async function startWharf(url: string): Promise<() => Promise<void>> {
  const handlers: HandlerMap = {
    'github:push': async (ctx) => {
      const mark = readMark(ctx.event.payload);
      for (const step of effectSteps) {
        await pause();
        await ctx.step(`effect:${step}`, (tx) => writeEffect(tx, mark.key, mark.seq, step, ctx.event.id));
      }
    },
  };
  // Warnings and worse go to stderr, which the rig keeps for its report:
  // ids and classes only, never a payload (worker/event-run.ts).
  const worker = createWorker({
    connectionString: url, concurrency, localQueue, handlers, logger: pino({ level: 'warn' }, pino.destination(2)),
  });
  await worker.start();
  return () => worker.stop();
}

async function startGraphile(url: string): Promise<() => Promise<void>> {
  // The task's business writes go through a pool of the application's own,
  // as a task that writes elsewhere than the job tables does.
  const effects = new pg.Pool({ connectionString: url, max: concurrency });
  effects.on('error', () => {});
  const consumer = await startGraphileWorker({
    connectionString: url,
    concurrency,
    localQueue: true,
    // Its warnings and errors to stderr, as Wharf's worker's, for the report.
    onLog: (level, message) => process.stderr.write(`${JSON.stringify({ level, msg: message.slice(0, 300) })}\n`),
    // A runner that stopped by itself handles nothing more: the process ends,
    // as graphile-worker's own CLI does, and the rig sees a worker gone.
    onStopped: (reason) => {
      const why = reason === undefined ? 'without an error' : reason instanceof Error ? reason.message : String(reason);
      process.stderr.write(`${JSON.stringify({ level: 'fatal', msg: `runner stopped by itself, ${why}` })}\n`);
      process.exit(1);
    },
    handle: async (payload) => {
      const mark = readMark(payload);
      for (const step of effectSteps) {
        await pause();
        await writeEffect(effects, mark.key, mark.seq, step, null);
      }
    },
  });
  return async () => {
    await consumer.stop();
    await effects.end();
  };
}

const stop = await (system === 'wharf' ? startWharf(databaseUrl) : startGraphile(databaseUrl));
say({ ready: true, pid: process.pid });
const reporter = setInterval(() => {
  say({ claims });
  claims = [];
}, 1000);

process.once('SIGTERM', () => {
  clearInterval(reporter);
  stop().then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(`stop failed: ${error instanceof Error ? error.name : 'error'}\n`);
      process.exit(1);
    },
  );
});
