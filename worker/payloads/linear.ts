// Linear's webhook payloads typed for handlers, from `@linear/sdk`'s own
// LinearWebhookEventTypeMap. Apart from the library's main entry so that
// only a host application that has `@linear/sdk` installed loads these
// types: one `import type {} from 'wharf-inbox/linear'` adds `linear` to
// ProviderPayloads, and a `'linear:Issue.create'` handler then receives the
// SDK's issue payload. Types only: nothing here exists at run time.
import type { LinearWebhookEventTypeMap } from '@linear/sdk/webhooks';

type ActionOf<Payload> = Payload extends { action: infer Action extends string } ? Action : string;

/** Linear's event type in Wharf is `<type>.<action>` (`linear:Issue.create`, `linear:Comment.update`). */
export type LinearEventMap = {
  [Type in keyof LinearWebhookEventTypeMap as `${Type & string}.${ActionOf<LinearWebhookEventTypeMap[Type]>}`]: LinearWebhookEventTypeMap[Type];
};

declare module '../provider-payloads.js' {
  interface ProviderPayloads {
    linear: LinearEventMap;
  }
}
