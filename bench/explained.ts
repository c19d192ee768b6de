// One statement's cost as the server counts it: its execution time and every
// buffer it touched (the functions it calls included), from EXPLAIN (ANALYZE,
// BUFFERS). Buffers are exact whatever else runs on the machine, which makes
// them the figure to compare across states; times are indicative.
import type pg from 'pg';
import { summarize } from './stats.js';

export interface Cost {
  ms: number;
  buffers: number;
}

interface ExplainNode {
  'Shared Hit Blocks': number;
  'Shared Read Blocks': number;
}

export async function explained(client: pg.PoolClient, sql: string): Promise<Cost> {
  const { rows } = await client.query<{ 'QUERY PLAN': [{ Plan: ExplainNode; 'Execution Time': number }] }>(
    `EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, COSTS OFF, FORMAT JSON) ${sql}`);
  const [plan] = rows[0]!['QUERY PLAN'];
  return { ms: plan['Execution Time'], buffers: plan.Plan['Shared Hit Blocks'] + plan.Plan['Shared Read Blocks'] };
}

export const medianCost = (costs: Cost[]): Cost => ({
  ms: summarize(costs.map((cost) => cost.ms)).median,
  buffers: summarize(costs.map((cost) => cost.buffers)).median,
});
