// The business rows the scenarios' handlers write: two steps per event, each
// one row in an append-only log without constraints, so that a step applied
// twice shows as two rows and the log's identity gives the order in which
// steps ran. Every correctness check of a scenario reads this table.
import type pg from 'pg';

type Db = Pick<pg.ClientBase | pg.Pool, 'query'>;

export const effectSteps = ['first', 'second'] as const;

export async function createEffectTable(db: Db): Promise<void> {
  await db.query(`CREATE TABLE public.scenario_effect (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope text NOT NULL,
    seq integer NOT NULL,
    step text NOT NULL,
    event_ref text,
    at timestamptz NOT NULL DEFAULT clock_timestamp())`);
  await db.query('CREATE INDEX scenario_effect_scope ON public.scenario_effect (scope, seq)');
}

/** One step's business write; `eventRef` is the system's own id of the event, where it has one. */
export async function writeEffect(db: Db, scope: string, seq: number, step: string, eventRef: string | null): Promise<void> {
  await db.query('INSERT INTO public.scenario_effect (scope, seq, step, event_ref) VALUES ($1, $2, $3, $4)',
    [scope, seq, step, eventRef]);
}

export interface EffectCounts {
  /** Events (scope, seq) whose last step is written. */
  handled: number;
  /** (event, step) pairs written more than once, and the extra rows. */
  duplicateSteps: number;
  /** Step rows written after a later event of the same scope had started. */
  orderViolations: number;
}

/**
 * Duplicates and order over the whole log. An order violation is a step of
 * sequence n written after a step of a higher sequence in the same scope
 * (the handled sequence numbers of a scope must not go back); a duplicate is
 * not also counted as a violation.
 */
export async function countEffects(db: Db): Promise<EffectCounts> {
  const { rows } = await db.query<{ handled: string; duplicates: string; violations: string }>(`
    WITH firsts AS (
      SELECT DISTINCT ON (scope, seq, step) id, scope, seq FROM public.scenario_effect ORDER BY scope, seq, step, id
    ), ordered AS (
      SELECT seq, max(seq) OVER (PARTITION BY scope ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
        FROM firsts
    )
    SELECT (SELECT count(DISTINCT (scope, seq)) FROM public.scenario_effect WHERE step = 'second') AS handled,
           (SELECT count(*) - count(DISTINCT (scope, seq, step)) FROM public.scenario_effect) AS duplicates,
           (SELECT count(*) FROM ordered WHERE before > seq) AS violations`);
  const row = rows[0]!;
  return { handled: Number(row.handled), duplicateSteps: Number(row.duplicates), orderViolations: Number(row.violations) };
}

/** Of the acknowledged events, those without their last step: lost, or not handled by the end. */
export async function unhandledOf(db: Db, acknowledged: ReadonlyArray<{ scope: string; seq: number }>): Promise<number> {
  const { rows } = await db.query<{ n: string }>(`
    SELECT count(*) AS n
      FROM unnest($1::text[], $2::int[]) AS a(scope, seq)
     WHERE NOT EXISTS (SELECT FROM public.scenario_effect e WHERE e.scope = a.scope AND e.seq = a.seq AND e.step = 'second')`,
  [acknowledged.map((a) => a.scope), acknowledged.map((a) => a.seq)]);
  return Number(rows[0]!.n);
}

/** Events whose last step was written in each second since `t0` (epoch ms), by the database's clock. */
export async function handledPerSecond(db: Db, t0: number): Promise<Map<number, number>> {
  const { rows } = await db.query<{ second: number; n: string }>(`
    SELECT floor((extract(epoch FROM at) * 1000 - $1) / 1000)::int AS second, count(*) AS n
      FROM (SELECT DISTINCT ON (scope, seq) at FROM public.scenario_effect WHERE step = 'second' ORDER BY scope, seq, id) s
     GROUP BY 1`, [t0]);
  return new Map(rows.map((row) => [row.second, Number(row.n)]));
}
