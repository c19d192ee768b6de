// The providers Wharf receives from, on the TypeScript side: one entry each.
// The SQL side is the table wharf.provider (a foreign key of wharf.connection);
// test/db/providers.test.ts fails when the two disagree. Adding a provider is
// a row there, an entry here and its adapter in edge/adapters/.

/**
 * Where a provider's secret lives:
 * - `app`: the environment of the edge, per app (a GitHub App, a Slack app);
 *   the provider itself vouches for the body, which may reach any subscribed
 *   workspace;
 * - `token`: per connection, a shared token stored as its SHA-256 only (GitLab);
 * - `signing_key`: per connection, an HMAC key stored encrypted with the key
 *   ring (WHARF_SECRET_KEYS).
 */
export type SecretPlace = 'app' | 'token' | 'signing_key';

/**
 * `issuedByProvider`: the provider draws the secret and shows it (Stripe's
 * `whsec_…`, Twilio's Auth Token): an operator stores that one, and Wharf
 * never makes one up for it. TypeScript's alone: the database needs only
 * where the secret lives.
 */
export const providers = {
  github: { secret: 'app', issuedByProvider: false },
  gitlab: { secret: 'token', issuedByProvider: false },
  slack: { secret: 'app', issuedByProvider: false },
  outline: { secret: 'signing_key', issuedByProvider: false },
  forgejo: { secret: 'signing_key', issuedByProvider: false },
  generic: { secret: 'signing_key', issuedByProvider: false },
  stripe: { secret: 'signing_key', issuedByProvider: true },
  shopify: { secret: 'signing_key', issuedByProvider: true },
  linear: { secret: 'signing_key', issuedByProvider: true },
  paddle: { secret: 'signing_key', issuedByProvider: true },
  zoom: { secret: 'signing_key', issuedByProvider: true },
  twilio: { secret: 'signing_key', issuedByProvider: true },
  bitbucket: { secret: 'signing_key', issuedByProvider: false },
  jira: { secret: 'signing_key', issuedByProvider: false },
  hmac: { secret: 'signing_key', issuedByProvider: false },
} as const satisfies Record<string, { secret: SecretPlace; issuedByProvider: boolean }>;

export type Provider = keyof typeof providers;

export const providerNames = Object.keys(providers) as Provider[];

export function isProvider(name: string): name is Provider {
  return Object.hasOwn(providers, name);
}

/** Where `provider`'s secret lives; undefined for a name that is no provider. */
export function secretPlaceOf(provider: string): SecretPlace | undefined {
  return isProvider(provider) ? providers[provider].secret : undefined;
}
