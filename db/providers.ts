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

export const providers = {
  github: { secret: 'app' },
  gitlab: { secret: 'token' },
  slack: { secret: 'app' },
  outline: { secret: 'signing_key' },
  forgejo: { secret: 'signing_key' },
  generic: { secret: 'signing_key' },
  stripe: { secret: 'signing_key' },
  shopify: { secret: 'signing_key' },
  linear: { secret: 'signing_key' },
  paddle: { secret: 'signing_key' },
  zoom: { secret: 'signing_key' },
  twilio: { secret: 'signing_key' },
  bitbucket: { secret: 'signing_key' },
  jira: { secret: 'signing_key' },
  hmac: { secret: 'signing_key' },
} as const satisfies Record<string, { secret: SecretPlace }>;

export type Provider = keyof typeof providers;

export const providerNames = Object.keys(providers) as Provider[];

export function isProvider(name: string): name is Provider {
  return Object.hasOwn(providers, name);
}

/** Where `provider`'s secret lives; undefined for a name that is no provider. */
export function secretPlaceOf(provider: string): SecretPlace | undefined {
  return isProvider(provider) ? providers[provider].secret : undefined;
}
