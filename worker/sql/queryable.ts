import type pg from 'pg';

/** A pool or one connection: each SQL module runs one statement on either. */
export type Queryable = Pick<pg.Pool | pg.ClientBase, 'query'>;
