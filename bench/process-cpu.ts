// CPU time that processes on this machine used over a measurement, read from
// /proc (Linux): PostgreSQL's backends, the receiver's process. Throughput on
// a shared two-core machine swings with its load; CPU per event says where a
// workload's time goes, and repeats better.
import { readFile } from 'node:fs/promises';
import type pg from 'pg';

/**
 * CPU a process has used so far, in µs: its time on a CPU from
 * /proc/<pid>/schedstat (nanoseconds), else user plus system time from
 * /proc/<pid>/stat, which counts clock ticks of 10 ms: too coarse for a short
 * measurement of a light process.
 */
export async function processCpuMicros(pid: number): Promise<number> {
  const schedstat = await readFile(`/proc/${pid}/schedstat`, 'utf8').catch(() => undefined);
  if (schedstat !== undefined) return Number(schedstat.split(' ')[0]) / 1000;
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

const cpuOrUndefined = (pid: number) => processCpuMicros(pid).catch(() => undefined);

/**
 * Starts counting the CPU of `pids`; the function it returns gives the µs they
 * used since (a process that exited in between counts nothing). Undefined
 * where there is no /proc to read.
 */
export async function meterProcesses(pids: number[]): Promise<(() => Promise<number>) | undefined> {
  const before = await Promise.all(pids.map(cpuOrUndefined));
  if (!before.some((micros) => micros !== undefined)) return undefined;
  return async () => {
    const after = await Promise.all(pids.map(cpuOrUndefined));
    return after.reduce<number>((sum, micros, i) => sum + ((micros ?? before[i] ?? 0) - (before[i] ?? 0)), 0);
  };
}

/**
 * The client backends of `pool`'s database (the one that asks included);
 * none when the server runs elsewhere, whose pids are not this machine's
 * postgres processes.
 */
async function databaseBackendPids(pool: pg.Pool): Promise<number[]> {
  const { rows } = await pool.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'`);
  const local = await Promise.all(rows.map(async ({ pid }) =>
    (await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '')).startsWith('postgres')));
  return rows.filter((_, i) => local[i]).map((row) => row.pid);
}

/**
 * Starts counting the CPU of the backends serving `pool`'s database: those
 * there now from now, and those that connect later (a consumer's own pool)
 * from their start. Call the function it returns before they disconnect; it
 * gives undefined where the server is not on this machine.
 */
export async function meterDatabaseBackends(pool: pg.Pool): Promise<() => Promise<number | undefined>> {
  const present = await databaseBackendPids(pool);
  const meterPresent = await meterProcesses(present);
  return async () => {
    const joined = (await databaseBackendPids(pool)).filter((pid) => !present.includes(pid));
    const since = await Promise.all(joined.map(cpuOrUndefined));
    if (!meterPresent && !since.some((micros) => micros !== undefined)) return undefined;
    return (meterPresent ? await meterPresent() : 0) + since.reduce<number>((sum, micros) => sum + (micros ?? 0), 0);
  };
}
