// The instance admin adds a signed source configured without code from the
// console: a scheme the validation refuses is a 400 page that says why and
// saves nothing; a good one is listed, and a delivery signed as it says
// (by node:crypto, Bitbucket's scheme) is stored through the same server's edge.
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { adminToken, signedIn, startConsoleRig, type ConsoleRig } from '../../support/console-rig.js';
import { storedSecret } from '../../support/edge-fixtures.js';

vi.setConfig({ testTimeout: 120_000 });

let rig: ConsoleRig;
const W = 731;

beforeAll(async () => {
  rig = await startConsoleRig();
  await rig.db.pool.query('SELECT wharf.upsert_workspace($1)', [W]);
});

afterAll(async () => {
  await rig?.close();
});

it('saves a configured HMAC source from the console, refusing a bad scheme with its reason, and the edge verifies with it', async () => {
  const { context, page } = await signedIn(rig, adminToken);
  try {
    const fill = async (signature: string) => {
      await page.goto(`${rig.consoleUrl}/workspaces/${W}/connections`);
      const form = page.getByRole('form', { name: 'Add a configured HMAC source' });
      await form.getByLabel("Source (the sender's URL)").fill('https://bitbucket.example');
      await form.getByLabel('Signature scheme (JSON)').fill(signature);
      await form.getByLabel('Subject pointers (comma-separated JSON pointers)').fill('/repository/full_name');
      const [response] = await Promise.all([page.waitForResponse((r) => r.request().method() === 'POST'),
                                            form.getByRole('button', { name: 'Save the source' }).click()]);
      return response.status();
    };
    expect(await fill('{"header": "X-Hub-Signature", "algorithm": "sha256", "encoding": "hex", "signed": "{timestamp}.{body}"}')).toBe(400);
    expect(await page.locator('body').textContent()).toContain('signed uses {timestamp}: say which header holds it');
    expect(await fill('not json')).toBe(400);
    expect(await page.locator('body').textContent()).toContain('must be a JSON object');
    const none = await rig.db.pool.query('SELECT count(*)::int AS n FROM wharf.connection WHERE workspace_id = $1', [W]);
    expect(none.rows).toEqual([{ n: 0 }]);

    expect(await fill('{"header": "X-Hub-Signature", "prefix": "sha256=", "algorithm": "sha256", "encoding": "hex", '
      + '"event_type": {"header": "X-Event-Key"}, "delivery_id": {"header": "X-Request-UUID"}}')).toBe(303);
    await page.getByRole('status').filter({ hasText: 'Configured HMAC source saved' }).waitFor();
    const { rows } = await rig.db.pool.query<{ id: string }>('SELECT id FROM wharf.connection WHERE workspace_id = $1 AND provider = $2', [W, 'hmac']);
    expect(rows).toHaveLength(1);
    const id = rows[0]!.id;
    expect(await page.getByRole('row').filter({ has: page.getByRole('rowheader', { name: id, exact: true }) }).textContent()).toContain('hmac');

    const secret = 'bitbucket_secret_from_console_test';
    await rig.db.pool.query('SELECT wharf.set_connection_secret($1, $2)', [id, await storedSecret('hmac', id, secret)]);
    await rig.db.pool.query('SELECT wharf.subscribe($1, $2)', [id, 'full_name:acme/api']);
    const body = JSON.stringify({ repository: { full_name: 'acme/api' }, push: {} });
    const response = await fetch(`${rig.server.url}/hooks/hmac/${id}`, {
      method: 'POST', body,
      headers: { 'content-type': 'application/json', 'x-event-key': 'repo:push', 'x-request-uuid': 'req-1',
                 'x-hub-signature': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}` },
    });
    expect(response.status).toBe(202);
    const stored = await rig.db.pool.query('SELECT event_type, subject FROM wharf.provider_event WHERE connection_id = $1', [id]);
    expect(stored.rows).toEqual([{ event_type: 'repo:push', subject: 'full_name:acme/api' }]);
  } finally {
    await context.close();
  }
});
