// The start-time check of a synchronous standby: on the test server, which has
// none, readSynchronousStandby says why; `wharf worker` warns and runs by
// default, refuses with WHARF_REQUIRE_SYNC_STANDBY=yes, and says nothing with
// skip. (test/db/switchover.test.ts reads it as synchronous on a real pair.)
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkSynchronousStandby, NoSynchronousStandbyError, readSynchronousStandby, readSynchronousStandbyPolicy,
} from '../../db/synchronous-standby.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { runWharf } from '../support/wharf-cli.js';
import { fixtureHandlers } from '../support/worker-process.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

describe('a primary without a synchronous standby', () => {
  it('is named so, with the reason', async () => {
    expect(await readSynchronousStandby(db.pool)).toEqual({ synchronous: false, reason: 'synchronous_standby_names is empty' });
  });

  it('warns by default, refuses with yes, is not read with skip', async () => {
    const warned: string[] = [];
    const logger = { warn: (_fields: Record<string, unknown>, message: string) => warned.push(message) };
    await checkSynchronousStandby(db.pool, 'no', logger);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toContain('a crash failover can lose deliveries already answered 202');
    await expect(checkSynchronousStandby(db.pool, 'yes', logger)).rejects.toThrow(NoSynchronousStandbyError);
    await checkSynchronousStandby(db.pool, 'skip', logger);
    expect(warned).toHaveLength(1);
  });

  it('reads WHARF_REQUIRE_SYNC_STANDBY, refusing a value it does not know', () => {
    expect(readSynchronousStandbyPolicy(undefined)).toBe('no');
    expect(readSynchronousStandbyPolicy('true')).toBe('yes');
    expect(readSynchronousStandbyPolicy('skip')).toBe('skip');
    expect(() => readSynchronousStandbyPolicy('maybe')).toThrow(/no, yes or skip/);
  });

  it('`wharf worker` refuses to start with WHARF_REQUIRE_SYNC_STANDBY=yes, naming why', async () => {
    const result = await runWharf(['worker', '--handlers', fixtureHandlers('record-order.ts')],
      { DATABASE_URL: db.url, WHARF_REQUIRE_SYNC_STANDBY: 'yes' });
    expect(result.code).not.toBe(0);
    expect(result.stderr + result.stdout).toContain('synchronous_standby_names is empty');
  }, 40_000);
});
