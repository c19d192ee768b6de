// The payload a handler receives, typed from the providers' own published
// type packages, by the key it is registered under. Types only: nothing here
// exists at run time, and nothing validates a payload against them.
import type { WebhookEventMap as GitHubEventMap } from '@octokit/webhooks-types';
import type { WebhookEvents as GitLabEvent } from 'gitlab-event-types';
import type { SlackEvent } from '@slack/types';

/** GitLab's event type in Wharf is the body's `object_kind` (`gitlab:push`, `gitlab:merge_request`). */
export type GitLabEventMap = {
  [Event in Extract<GitLabEvent, { object_kind: string }> as Event['object_kind']]: Event;
};

/** What Slack's Events API posts: the envelope around one event. */
export interface SlackEventEnvelope<Event extends SlackEvent = SlackEvent> {
  type: 'event_callback';
  token?: string;
  team_id: string;
  enterprise_id?: string;
  api_app_id: string;
  event: Event;
  event_id: string;
  event_time: number;
  event_context?: string;
  authorizations?: { team_id: string | null; user_id: string; is_bot: boolean; enterprise_id?: string | null }[];
}

/** Slack's event type in Wharf is `event.type` (`slack:message`, `slack:app_mention`). */
export type SlackEventMap = { [Type in SlackEvent['type']]: SlackEventEnvelope<Extract<SlackEvent, { type: Type }>> };

/** Payload types by provider and event type; the other providers' payloads are `unknown`. */
export interface ProviderPayloads {
  github: GitHubEventMap;
  gitlab: GitLabEventMap;
  slack: SlackEventMap;
}

/** `provider:event_type` for every typed event. */
export type TypedHandlerKey = {
  [Provider in keyof ProviderPayloads]: `${Provider}:${keyof ProviderPayloads[Provider] & string}`;
}[keyof ProviderPayloads];

/** The payload of the events a handler key receives: typed for a typed key, else `unknown`. */
export type PayloadOf<Key extends string> = Key extends `${infer Provider}:${infer EventType}`
  ? Provider extends keyof ProviderPayloads
    ? EventType extends keyof ProviderPayloads[Provider] ? ProviderPayloads[Provider][EventType] : unknown
    : unknown
  : unknown;
