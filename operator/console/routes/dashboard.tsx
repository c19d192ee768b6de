// A workspace's dashboard: admitted and handled per minute, queue depth, and
// the age of the oldest waiting event over the last hours, as computed in SQL
// from the inbox itself (wharf.queue_history), drawn as inline SVG with a
// summary in words and the numbers in a table. The figures and charts
// update themselves every few seconds (live-script.ts).
import type { Hono } from 'hono';
import { showWorkspace } from '../../sql/operator.js';
import { queueHistory, type QueueMinute } from '../../sql/queue-history.js';
import { clock, LineChart } from '../components/line-chart.js';
import type { ConsoleEnv, RouteDeps } from '../env.js';
import { ConsoleError } from '../errors.js';
import { frameOf } from '../frame.js';
import { LiveUpdates, Page, StateBadge } from '../layout.js';
import { workspaceScope } from '../scope.js';

const spans = [1, 3, 6, 12, 24];
const defaultHours = 3;

export function registerDashboard(app: Hono<ConsoleEnv>, deps: RouteDeps): void {
  const { db, basePath } = deps;

  app.get('/workspaces/:ws', async (c) => {
    const scope = workspaceScope(c, basePath);
    const workspaceId = scope.workspaceId;
    const asked = Number(c.req.query('hours') ?? defaultHours);
    const hours = spans.includes(asked) ? asked : defaultHours;
    const workspace = await showWorkspace(db, workspaceId);
    if (!workspace) throw new ConsoleError(404, `There is no workspace ${workspaceId}.`);
    const history = await queueHistory(db, workspaceId, hours);
    const minutes = history.map((minute) => minute.at);
    // Ages come with fractions of a second: whole seconds are what a reader needs.
    const column = (key: keyof Omit<QueueMinute, 'at'>) => history.map((minute) => Math.round(Number(minute[key])));
    const latest = history.at(-1);
    return c.html(
      <Page {...frameOf(c, basePath, scope, 'dashboard')} title={`Dashboard · ${scope.label}`}>
        <LiveUpdates nonce={c.get('secureHeadersNonce')} />
        <div id="live-dashboard" data-live>
        <p>
          Workspace state: <StateBadge state={workspace.state} />. Waiting now: {String(latest?.depth ?? 0)} event(s),
          the oldest {String(Math.round(Number(latest?.oldest_age_seconds ?? 0)))} s old. <a href={`${scope.base}/dead`}>Dead letters</a>.
        </p>
        </div>
        <form method="get" action={scope.base} class="filters" aria-label="Time span">
          <label>
            Last
            <select name="hours">{spans.map((span) => <option value={String(span)} selected={span === hours}>{`${span} h`}</option>)}</select>
          </label>
          <button type="submit">Show</button>
        </form>
        <div id="live-charts" data-live class="charts">
          <LineChart id="throughput" title="Admitted and handled per minute" unit="per minute" minutes={minutes} totals
            series={[{ name: 'admitted', values: column('admitted') }, { name: 'handled', values: column('handled') }]} />
          <LineChart id="depth" title="Queue depth (events waiting or running)" unit="events" minutes={minutes} totals={false}
            series={[{ name: 'depth', values: column('depth') }]} />
          <LineChart id="age" title="Age of the oldest waiting event (seconds)" unit="s" minutes={minutes} totals={false}
            series={[{ name: 'oldest age', values: column('oldest_age_seconds') }]} />
        </div>
        <details>
          <summary>The numbers, minute by minute</summary>
          <table>
            <caption class="visually-hidden">Queue history per minute</caption>
            <thead>
              <tr>
                <th scope="col">Minute (UTC)</th><th scope="col" class="num">Admitted</th><th scope="col" class="num">Handled</th>
                <th scope="col" class="num">Dead</th><th scope="col" class="num">Depth</th><th scope="col" class="num">Oldest age (s)</th>
              </tr>
            </thead>
            <tbody>
              {history.map((minute) => (
                <tr>
                  <th scope="row">{clock(minute.at)}</th>
                  <td class="num">{String(minute.admitted)}</td>
                  <td class="num">{String(minute.handled)}</td>
                  <td class="num">{String(minute.dead)}</td>
                  <td class="num">{String(minute.depth)}</td>
                  <td class="num">{String(Math.round(Number(minute.oldest_age_seconds)))}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </details>
      </Page>,
    );
  });
}
