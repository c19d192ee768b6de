// Stripe's events typed for handlers, from the `stripe` package's own
// `Stripe.Event` (discriminated by `type`). Apart from the library's main
// entry so that only a host application that has `stripe` installed loads
// these types: one `import type {} from 'wharf-inbox/stripe'` adds `stripe`
// to ProviderPayloads, and `'stripe:invoice.paid'` handlers then receive a
// `Stripe.InvoicePaidEvent`. Types only: nothing here exists at run time.
import type Stripe from 'stripe';

/** Stripe's event type in Wharf is the event's `type` (`stripe:invoice.paid`). */
export type StripeEventMap = { [Type in Stripe.Event['type']]: Extract<Stripe.Event, { type: Type }> };

declare module '../provider-payloads.js' {
  interface ProviderPayloads {
    stripe: StripeEventMap;
  }
}
