// A database that answers WH409 ("route changed") for one delivery, as
// wharf.admit did before migration 0062 whenever a lifecycle change committed
// between its two reads of the route. The SQL now reads the route once, under
// its source's lock, and never raises it; the edges still answer it with a
// 503 that makes the provider retry (a database not yet upgraded), and this
// keeps that answer tested against a real server.
import { randomBytes } from 'node:crypto';
import type pg from 'pg';

/** Makes every insert of `deliveryKey` into the inbox raise WH409 until the returned function is called. */
export async function raiseRouteChangedFor(db: Pick<pg.Pool, 'query'>, deliveryKey: string): Promise<() => Promise<void>> {
  const trigger = `route_changed_${randomBytes(6).toString('hex')}`;
  await db.query(`
    CREATE OR REPLACE FUNCTION public.raise_route_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'wharf.admit: the route of % changed during admission; retry', NEW.source USING ERRCODE = 'WH409';
    END $$`);
  await db.query(`
    CREATE TRIGGER ${trigger} BEFORE INSERT ON wharf.provider_event
       FOR EACH ROW WHEN (NEW.delivery_key = ${quoteLiteral(deliveryKey)}) EXECUTE FUNCTION public.raise_route_changed()`);
  return async () => {
    await db.query(`DROP TRIGGER ${trigger} ON wharf.provider_event`);
  };
}

function quoteLiteral(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}
