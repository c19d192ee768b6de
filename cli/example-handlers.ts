// The handlers `wharf start` runs when given none: they log what arrives, so a
// new user sees deliveries flow end to end. A payload with
// `"wharf_demo_fail": true` fails as a payload-parsing error and ends DEAD at
// once, to show dead letters and replay; `"wharf_demo_sleep_ms": n` takes that
// long, to show a shutdown draining and releasing.
import { PayloadParsingError } from '../worker/errors.js';
import type { Handler, HandlerMap } from '../worker/handlers.js';

const logDelivery: Handler = async (ctx) => {
  const { event } = ctx;
  const payload = (typeof event.payload === 'object' && event.payload !== null ? event.payload : {}) as Record<string, unknown>;
  if (payload.wharf_demo_fail === true) {
    throw new PayloadParsingError('the demo payload asked to fail');
  }
  if (typeof payload.wharf_demo_sleep_ms === 'number') {
    const sleepMs = payload.wharf_demo_sleep_ms;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, sleepMs);
      ctx.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        reject(ctx.signal.reason);
      }, { once: true });
    });
  }
  await ctx.step(`logged:${event.deliveryKey}`, async () => {
    // ctx.logger already names the event, provider, type and attempt.
    ctx.logger.info({ subject: event.subject }, 'example handler received an event');
  });
};

export const exampleHandlers: HandlerMap = Object.fromEntries(
  ['github', 'gitlab', 'slack', 'outline', 'forgejo', 'generic'].map((provider) => [`${provider}:*`, logDelivery]),
);
