// Stripe's and Linear's typed payloads (worker/payloads/): a `stripe:` or
// `linear:` handler receives the event of its type as the provider's own
// package declares it. The
// checks are the type checker's (`tsc --noEmit` covers test/); the test
// runs a typed handler over a stored payload of that shape.
import { expect, expectTypeOf, it } from 'vitest';
import type Stripe from 'stripe';
import type { HandlerMap, PayloadOf } from '../../worker/index.js';
import type { EntityWebhookPayloadWithIssueData } from '@linear/sdk/webhooks';
import type {} from '../../worker/payloads/linear.js';
import type {} from '../../worker/payloads/stripe.js';

it('types a stripe:<type> handler by Stripe.Event of that type', async () => {
  expectTypeOf<PayloadOf<'stripe:invoice.paid'>>().toEqualTypeOf<Stripe.InvoicePaidEvent>();
  expectTypeOf<PayloadOf<'stripe:customer.created'>['data']['object']>().toEqualTypeOf<Stripe.Customer>();
  // Not a Stripe event type: unknown, as for any untyped key.
  expectTypeOf<PayloadOf<'stripe:no.such.type'>>().toBeUnknown();
  let seen: string | undefined;
  const handlers = {
    'stripe:invoice.paid': async (ctx) => {
      // @ts-expect-error an invoice has no such field
      void ctx.event.payload.data.object.no_such_field;
      seen = ctx.event.payload.data.object.customer as string;
    },
  } satisfies HandlerMap;
  const payload = { id: 'evt_1', type: 'invoice.paid', data: { object: { object: 'invoice', customer: 'cus_1' } } };
  // The handler as the worker calls it, with the stored payload.
  await handlers['stripe:invoice.paid']({ event: { payload } } as unknown as Parameters<typeof handlers['stripe:invoice.paid']>[0]);
  expect(seen).toBe('cus_1');
});

it('types a linear:<type>.<action> handler by the SDK payload of that type', () => {
  expectTypeOf<PayloadOf<'linear:Issue.create'>>().toEqualTypeOf<EntityWebhookPayloadWithIssueData>();
  expectTypeOf<PayloadOf<'linear:Issue.create'>['data']['title']>().toEqualTypeOf<string>();
  expectTypeOf<PayloadOf<'linear:NoSuchType.create'>>().toBeUnknown();
});
