// The least a webhook receiver on this stack does, as the reference the Node
// receiver is measured against (issue 33): Hono on @hono/node-server, GitHub's
// signature check over the raw body (HMAC-SHA256, compared in constant time),
// one JSON parse of the body, and one plain INSERT per request into the
// bench's plain_inbox, on a pool of the Node receiver's size (pg's default,
// 10: server/node.ts leaves it). No dedupe beyond the table's unique key, no
// routing, no receipt, no log line, no metric.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import pg from 'pg';

export async function createPlainInbox(pool: pg.Pool): Promise<void> {
  await pool.query(`
    CREATE TABLE plain_inbox (
      id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      provider     text NOT NULL,
      delivery_key text NOT NULL,
      event_type   text NOT NULL,
      subject      text,
      payload      jsonb NOT NULL,
      headers      jsonb NOT NULL DEFAULT '{}',
      received_at  timestamptz NOT NULL DEFAULT now(),
      UNIQUE (provider, delivery_key)
    )`);
}

const insert = `INSERT INTO plain_inbox (provider, delivery_key, event_type, subject, payload)
                VALUES ('github', $1, $2, $3, $4)`;

export interface MinimalReceiver {
  url: string;
  close(): Promise<void>;
}

export async function startMinimalReceiver(options: { databaseUrl: string; secret: string }): Promise<MinimalReceiver> {
  const pool = new pg.Pool({ connectionString: options.databaseUrl, max: 10 });
  pool.on('error', () => {});
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const app = new Hono();
  app.post('/hooks/github/:app', async (c) => {
    const body = new Uint8Array(await c.req.arrayBuffer());
    const signature = Buffer.from(c.req.header('x-hub-signature-256') ?? '');
    const expected = Buffer.from(`sha256=${createHmac('sha256', options.secret).update(body).digest('hex')}`);
    if (signature.length !== expected.length || !timingSafeEqual(signature, expected)) return c.json({ error: 'bad-signature' }, 401);
    const text = decoder.decode(body);
    const payload = JSON.parse(text) as { repository?: { full_name?: unknown } };
    const repository = payload.repository?.full_name;
    await pool.query(insert, [
      c.req.header('x-github-delivery'), c.req.header('x-github-event'),
      typeof repository === 'string' ? `repo:${repository}` : null, text,
    ]);
    return c.json({ status: 'accepted' }, 202);
  });
  const { server, address } = await new Promise<{ server: ReturnType<typeof serve>; address: AddressInfo }>((resolve) => {
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (address) => resolve({ server, address }));
  });
  return {
    url: `http://127.0.0.1:${address.port}`,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await pool.end();
    },
  };
}
