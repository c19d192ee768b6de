// The providers Wharf receives from, on the TypeScript side: one entry each.
// The SQL side is the table wharf.provider (a foreign key of wharf.connection);
// test/db/providers.test.ts fails when the two disagree. Adding a provider is
// a row there, an entry here and its adapter in edge/adapters/; the lists of
// providers in the docs and the CLI's help are tested against this one
// (test/docs/provider-lists.test.ts) or made from it.

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
 * TypeScript's alone (the database needs only where the secret lives):
 * - `issuedByProvider`: the provider draws the secret and shows it (Stripe's
 *   `whsec_…`, Twilio's Auth Token): an operator stores that one, and Wharf
 *   never makes one up for it;
 * - `title`: the provider as the docs name it;
 * - `kinds`: the connection kinds `wharf connections add --kind` takes for
 *   it, first the one its deliveries arrive through (admission finds a GitHub
 *   App's source by `app_installation` and a Slack app's by `slack_team`; a
 *   connection-keyed endpoint names its connection, whatever its kind).
 */
export const providers = {
  github: { secret: 'app', issuedByProvider: false, title: 'GitHub App', kinds: ['app_installation', 'pat'] },
  gitlab: { secret: 'token', issuedByProvider: false, title: 'GitLab', kinds: ['webhook'] },
  slack: { secret: 'app', issuedByProvider: false, title: 'Slack app', kinds: ['slack_team'] },
  outline: { secret: 'signing_key', issuedByProvider: false, title: 'Outline', kinds: ['webhook'] },
  forgejo: { secret: 'signing_key', issuedByProvider: false, title: 'Forgejo / Gitea', kinds: ['webhook'] },
  generic: { secret: 'signing_key', issuedByProvider: false, title: 'Standard Webhooks', kinds: ['webhook'] },
  stripe: { secret: 'signing_key', issuedByProvider: true, title: 'Stripe', kinds: ['webhook'] },
  shopify: { secret: 'signing_key', issuedByProvider: true, title: 'Shopify', kinds: ['webhook'] },
  linear: { secret: 'signing_key', issuedByProvider: true, title: 'Linear', kinds: ['webhook'] },
  paddle: { secret: 'signing_key', issuedByProvider: true, title: 'Paddle Billing', kinds: ['webhook'] },
  zoom: { secret: 'signing_key', issuedByProvider: true, title: 'Zoom', kinds: ['webhook'] },
  twilio: { secret: 'signing_key', issuedByProvider: true, title: 'Twilio', kinds: ['webhook'] },
  bitbucket: { secret: 'signing_key', issuedByProvider: false, title: 'Bitbucket Cloud', kinds: ['webhook'] },
  jira: { secret: 'signing_key', issuedByProvider: false, title: 'Jira', kinds: ['webhook'] },
  hmac: { secret: 'signing_key', issuedByProvider: false, title: 'configured HMAC', kinds: ['hmac'] },
} as const satisfies Record<string, { secret: SecretPlace; issuedByProvider: boolean; title: string; kinds: readonly [string, ...string[]] }>;

export type Provider = keyof typeof providers;

export const providerNames = Object.keys(providers) as Provider[];

export function isProvider(name: string): name is Provider {
  return Object.hasOwn(providers, name);
}

/** Where `provider`'s secret lives; undefined for a name that is no provider. */
export function secretPlaceOf(provider: string): SecretPlace | undefined {
  return isProvider(provider) ? providers[provider].secret : undefined;
}

/** The providers whose secret lives in one of `places`, in the registry's order. */
export function providersWithSecretIn(...places: SecretPlace[]): Provider[] {
  return providerNames.filter((name) => places.includes(providers[name].secret));
}

/** The titles of `names` as prose: `Stripe, Shopify and Linear`. */
export function titlesOf(names: readonly Provider[], conjunction: 'and' | 'or' = 'and'): string {
  const titles = names.map((name) => providers[name].title);
  return titles.length < 2 ? titles.join('') : `${titles.slice(0, -1).join(', ')} ${conjunction} ${titles.at(-1)}`;
}
