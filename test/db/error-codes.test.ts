// One reading of a failed call's SQLSTATE: the receiver (classifyDatabaseError)
// and the worker (classifyFailure) agree on what "the database cannot serve
// now" is, and a connection that stopped being a primary's is retired.
import { describe, expect, it } from 'vitest';
import { classifyDatabaseError } from '../../db/database.js';
import { isUnavailableSqlState, retiresConnection, sqlState } from '../../db/error-codes.js';
import { classifyFailure } from '../../worker/classify.js';

const withCode = (code: string, message = 'server said no'): Error => Object.assign(new Error(message), { code });

describe('SQLSTATEs', () => {
  it('reads a SQLSTATE only from a five-character code that is no socket code', () => {
    expect(sqlState(withCode('25006'))).toBe('25006');
    expect(sqlState(withCode('EPIPE'))).toBeUndefined();
    expect(sqlState(withCode('ECONNRESET'))).toBeUndefined();
    expect(sqlState({ code: 42 })).toBeUndefined();
    expect(sqlState('25006')).toBeUndefined();
  });

  it('the receiver answers 503 and the worker retries without the budget for the same codes, 57014 and 25006 included', () => {
    const unavailable = ['08006', '08001', '53300', '57P01', '57P02', '57P03', '57014', '58000', '25006'];
    for (const code of unavailable) {
      expect(isUnavailableSqlState(code), code).toBe(true);
      expect(classifyDatabaseError(withCode(code)), code).toBe('database-unavailable');
      expect(classifyFailure(withCode(code)), code).toMatchObject({ action: 'fail', kind: 'transient' });
    }
    for (const code of ['23505', '22P02', '42501', '25P02']) {
      expect(isUnavailableSqlState(code), code).toBe(false);
      expect(classifyDatabaseError(withCode(code)), code).toBe('database-error');
      expect(classifyFailure(withCode(code)), code).toMatchObject({ action: 'fail', kind: 'unknown' });
    }
  });

  it('retires a connection whose server became a standby, shuts down or broke, and no other', () => {
    for (const error of [withCode('25006'), withCode('57P01'), withCode('57P02'), withCode('57P03'), withCode('08006'),
      withCode('ECONNRESET'), new Error('Connection terminated unexpectedly')]) {
      expect(retiresConnection(error), String((error as { code?: string }).code ?? error.message)).toBe(true);
    }
    for (const error of [withCode('57014'), withCode('40001'), withCode('23505'), withCode('55P03'), new Error('boom')]) {
      expect(retiresConnection(error), String((error as { code?: string }).code ?? error.message)).toBe(false);
    }
  });
});
