// Events of one workspace, and installation rows (NULL workspace) for the
// instance admin: list, show, dead letters, replay.
import type { Context, Hono } from 'hono';
import { requireAdmin, requireWorkspace, type OperatorEnv, type Principal } from '../auth.js';
import { optionalBoolean, readJsonObject } from '../body.js';
import type { Database } from '../../../db/database.js';
import { ApiError } from '../errors.js';
import { parseId, parseLimit, parseState, parseSubject } from '../params.js';
import { type EventOwner, listAdmissions, listDead, listEvents, showEvent } from '../../sql/operator.js';
import { replayEvent } from '../../sql/replay-retention.js';

type Ctx = Context<OperatorEnv>;

/** The owner a workspace route names, after checking the caller may reach it. */
function workspaceOwner(c: Ctx): { owner: EventOwner; principal: Principal } {
  const workspaceId = parseId(c.req.param('ws'), 'workspace');
  return { owner: { workspaceId }, principal: requireWorkspace(c, workspaceId) };
}

function installationOwner(c: Ctx): { owner: EventOwner; principal: Principal } {
  return { owner: { installation: true }, principal: requireAdmin(c) };
}

function pageQuery(c: Ctx) {
  const before = c.req.query('cursor');
  return {
    subject: parseSubject(c.req.query('subject')),
    limit: parseLimit(c.req.query('limit')),
    before: before === undefined || before === '' ? undefined : parseId(before, 'cursor'),
  };
}

export function registerEventRoutes(app: Hono<OperatorEnv>, db: Database): void {
  for (const [base, ownerOf] of [
    ['/workspaces/:ws', workspaceOwner],
    ['/installation', installationOwner],
  ] as const) {
    // /installation-events/dead is registered before /installation-events/:id,
    // which would otherwise take "dead" for an id.
    const events = base === '/installation' ? '/installation-events' : `${base}/events`;
    const dead = base === '/installation' ? '/installation-events/dead' : `${base}/dead`;

    // The admission log: what was refused or dropped, never stored.
    app.get(base === '/installation' ? '/admissions' : `${base}/admissions`, async (c) => {
      const { owner } = ownerOf(c);
      const { limit, before } = pageQuery(c);
      return c.json(await listAdmissions(db, owner, { limit, ...(before ? { before } : {}) }));
    });

    app.get(dead, async (c) => {
      const { owner } = ownerOf(c);
      return c.json(await listDead(db, owner, pageQuery(c)));
    });

    app.get(events, async (c) => {
      const { owner } = ownerOf(c);
      const state = parseState(c.req.query('state'));
      return c.json(await listEvents(db, owner, { ...pageQuery(c), state }));
    });

    app.get(`${events}/:id`, async (c) => {
      const { owner } = ownerOf(c);
      const id = parseId(c.req.param('id'), 'event id');
      const event = await showEvent(db, owner, id);
      if (!event) throw notFound(id);
      return c.json(event);
    });

    app.post(`${events}/:id/replay`, async (c) => {
      const { owner, principal } = ownerOf(c);
      const id = parseId(c.req.param('id'), 'event id');
      const force = optionalBoolean(await readJsonObject(c), 'force');
      const result = await replayEvent(db, owner, id, principal.account, force);
      if (result.replayed) return c.json(result.event, 202);
      switch (result.reason) {
        case 'not_found':
          throw notFound(id);
        case 'uncertain_outcome':
          throw new ApiError(409, 'uncertain_outcome',
            'the handler may have had an external effect; check it, then replay with {"force": true}');
        case 'not_replayable':
          throw new ApiError(409, 'not_replayable', `only a DEAD event can be replayed; this one is ${result.state}`,
            { state: result.state });
      }
    });
  }
}

function notFound(id: string): ApiError {
  return new ApiError(404, 'not_found', `no event ${id} here`);
}
