// Every environment variable (and Worker binding) Wharf reads: its name, the
// value used when it is unset, what it means and who reads it. The code takes
// its defaults and the names of the per-app variables from here, a test
// checks that every variable the code reads is declared here and every
// declaration is read, and docs/configuration.md is generated from it
// (`npm run docs:config`). Runtime-neutral: the Worker imports it too.
//
// To add a variable: declare it below, read it (defaults from here), run
// `npm run docs:config`.
import { providersWithSecretIn, titlesOf } from './providers.js';

/** Who reads a variable; the reference groups them so. */
export const readers = {
  edge: 'the edge receiver, on Node (`wharf serve`, `wharf start`) and in the Worker',
  'node-server': 'the Node server (`wharf serve`, `wharf start`)',
  'cloudflare-worker': 'the Cloudflare Worker (a var, a secret or a binding of `wrangler.toml`)',
  cli: 'the `wharf` command',
  'worker-host': 'a worker host (`wharf worker`)',
  sweeper: 'the GitHub redelivery sweeper (`wharf worker --sweep-app`, `wharf recover`)',
  development: 'development tools: the tests, `npm run bench`, `npm run sql:release`, the Neon HTTP stand-in',
} as const;

export type Reader = keyof typeof readers;

/** How a value is written, and how its default is shown. */
export type ValueKind = 'text' | 'url' | 'secret' | 'integer' | 'bytes' | 'seconds' | 'milliseconds' | 'duration' | 'port' | 'list' | 'binding';

export interface Declaration {
  kind: ValueKind;
  /** The value the code uses when the variable is unset; absent when there is none. */
  default?: string | number;
  /** When the default is not a constant: what it is, in words. */
  defaultText?: string;
  readBy: readonly Reader[];
  description: string;
}

export const environment = {
  DATABASE_URL: {
    kind: 'secret',
    defaultText: '`wharf start`: an embedded PostgreSQL in `.wharf/`',
    readBy: ['cli', 'cloudflare-worker', 'development'],
    description: 'PostgreSQL connection string (the `--database-url` of every verb). On Node also libpq\'s multi-host form, `postgres://h1:5432,h2:5432/db?target_session_attrs=read-write` (or `primary`): each connection goes to the host that accepts writes now. In the Worker: Neon\'s connection string, a secret (the Neon HTTP path). For the tests, the benchmark and `sql:release`: a server where they may create databases.',
  },
  WHARF_REQUIRE_SYNC_STANDBY: {
    kind: 'text',
    default: 'no',
    readBy: ['cli'],
    description: 'Whether `wharf start`, `serve` and `worker` insist that the primary has a synchronous standby (`synchronous_standby_names` set, `synchronous_commit` `on`, `remote_write` or `remote_apply`), without which a crash failover can lose deliveries already answered 202. `no`: warn at start when it has none; `yes`: refuse to start; `skip`: do not check (storage that replicates every commit below PostgreSQL: Aurora, RDS Multi-AZ instances, Neon). An embedded development database is never checked.',
  },
  WHARF_OPERATOR_DATABASE_URL: {
    kind: 'secret',
    defaultText: 'the edge\'s `DATABASE_URL`',
    readBy: ['node-server'],
    description: 'The operator API\'s connection string, as the `wharf_operator` role (`wharf serve --operator-database-url`).',
  },
  WHARF_TRUSTED_PROXY_HOPS: {
    kind: 'integer',
    default: 0,
    readBy: ['node-server'],
    description: 'How many reverse proxies stand in front of `wharf serve`. 0: the client whose failed sign-ins are counted is the socket\'s address, and X-Forwarded-For is never read (any client can write it). N: the Nth X-Forwarded-For entry from the end, the one the nearest trusted proxy wrote. Whole numbers 0-10; anything else is logged and read as 0. On Workers the client is `CF-Connecting-IP`.',
  },
  WHARF_ADMIN_TOKEN: {
    kind: 'secret',
    defaultText: '`wharf serve`: no operator API; `wharf start`: generated, kept in `.wharf/`',
    readBy: ['node-server'],
    description: 'The instance admin\'s bearer token. When set, `wharf serve` also serves the operator API at `/api` and the console at `/console`. At least 32 printable characters, 16 of them distinct (`openssl rand -base64 32`).',
  },
  WHARF_SECRET_KEYS: {
    kind: 'secret',
    defaultText: '`wharf start`: a development ring, kept in `.wharf/`',
    readBy: ['edge', 'node-server', 'worker-host', 'cli'],
    // The providers from the registry, so that a new one is never left out.
    description: 'The key ring connections\' signing keys and destinations\' signing secrets and credentials are stored under (AES-256-GCM): comma-separated `<key id>:<base64 of 32 random bytes>`, newest first. The newest encrypts, every key decrypts. '
      + `Without it, a connection of ${titlesOf(providersWithSecretIn('signing_key'), 'or')} answers 503 \`secret-unreadable\`, `
      + 'the operator surface cannot create a destination or rotate its secret, and a worker host leaves destinations\' deliveries to hosts that have it.',
  },
  WHARF_FORWARD_ALLOW_PRIVATE: {
    kind: 'text',
    default: 'false',
    readBy: ['worker-host'],
    description: 'Whether destinations may resolve to loopback, private, link-local and unique-local addresses (`true`: an application on the same network). Cloud metadata addresses stay refused. The flag `--forward-allow-private` wins over it.',
  },
  WHARF_FORWARD_ALLOW_NETWORKS: {
    kind: 'list',
    defaultText: 'none',
    readBy: ['worker-host'],
    description: 'Comma-separated CIDRs destinations may resolve to whatever their range (e.g. `10.20.0.0/16`); the flag `--forward-allow-networks` wins over it.',
  },
  WHARF_MAX_BODY_BYTES: {
    kind: 'bytes',
    default: 25 * 1024 * 1024,
    readBy: ['edge'],
    description: 'The largest body the edge accepts (GitHub\'s own cap); past it, 413.',
  },
  WHARF_MAX_INFLIGHT_BYTES: {
    kind: 'bytes',
    default: 64 * 1024 * 1024,
    readBy: ['edge'],
    description: 'Body bytes read at once, across requests, before their signatures are verified; past it, 503 `edge-busy` with `Retry-After`.',
  },
  WHARF_SECRET_CACHE_SECONDS: {
    kind: 'seconds',
    default: 30,
    readBy: ['edge'],
    description: 'How long a process or isolate keeps what it read of a connection (provider, source, secrets), or that there is none: a rotated secret, or a connection created after a delivery found none, takes effect within it.',
  },
  WHARF_MAX_CONNECTIONS: {
    kind: 'integer',
    default: 1024,
    readBy: ['node-server'],
    description: 'Sockets the Node server holds at once.',
  },
  WHARF_ADMIT_BATCH: {
    kind: 'text',
    default: '64,1MB',
    readBy: ['node-server'],
    description: 'The Node receiver\'s bound on one admission batch while concurrent deliveries coalesce into one `wharf.admit_many` call: `<deliveries>[,<bytes>]`, bytes with an optional `kB` or `MB` (1024-based), counting the bodies\' JSON text (a larger body goes alone). `off`, or a bound of 1 delivery, turns coalescing off: every request calls `wharf.admit` itself, as the Worker does. A value that does not parse stops the server from starting.',
  },
  WHARF_DATABASE_TIMEOUT_MS: {
    kind: 'milliseconds',
    default: 5_000,
    readBy: ['cloudflare-worker', 'node-server'],
    description: 'How long one statement of the edge may take, connection included, in the Worker and on Node (there also its pool\'s `statement_timeout`); past it the delivery answers 503 with `Retry-After`, behind a long lock as when the database is down. On Node it also bounds each delivery\'s wait from its arrival, its time queued behind a batch in flight included.',
  },
  NEON_HTTP_ENDPOINT: {
    kind: 'url',
    defaultText: 'Neon\'s own endpoint',
    readBy: ['cloudflare-worker'],
    description: 'Where the Neon HTTP path sends its statements instead of Neon\'s endpoint: the local stand-in (`npm run neon-http-stand-in`) for `wrangler dev`.',
  },
  HYPERDRIVE: {
    kind: 'binding',
    defaultText: 'unbound: the Neon HTTP path, on `DATABASE_URL`',
    readBy: ['cloudflare-worker'],
    description: 'A Hyperdrive binding: the Worker reaches PostgreSQL through Hyperdrive with `pg`. It wins over `DATABASE_URL`.',
  },
  WHARF_API_URL: {
    kind: 'url',
    defaultText: 'none: the verbs run the API in process on `DATABASE_URL`',
    readBy: ['cli'],
    description: 'A running `wharf serve` that the operator verbs call (their `--api`), with `WHARF_TOKEN`.',
  },
  WHARF_TOKEN: {
    kind: 'secret',
    readBy: ['cli'],
    description: 'The bearer token the operator verbs send with `--api`: the admin token or a workspace token.',
  },
  WHARF_PUBLIC_URL: {
    kind: 'url',
    default: 'http://127.0.0.1:8787',
    readBy: ['cli'],
    description: 'The edge\'s public base URL, for the endpoint `wharf connections rotate-secret` prints (its `--public-url`).',
  },
  WHARF_SWEEP_APPS: {
    kind: 'list',
    readBy: ['worker-host'],
    description: 'GitHub Apps, comma-separated, whose failed deliveries this host sweeps (`wharf worker --sweep-app`).',
  },
  WHARF_SWEEP_EVERY: {
    kind: 'duration',
    default: 5 * 60_000,
    readBy: ['worker-host'],
    description: 'How often a host tries the redelivery sweep, spread by a quarter either way (`wharf worker --sweep-every`); one host at a time sweeps an App.',
  },
  WHARF_SWEEP_LEASE: {
    kind: 'duration',
    default: 60_000,
    readBy: ['worker-host'],
    description: 'How long a sweep stays claimed without a sign of life; another host takes over the sweep of a host that died after that long (`wharf worker --sweep-lease`).',
  },
  WHARF_ALERT_EVERY: {
    kind: 'duration',
    default: 10_000,
    readBy: ['worker-host'],
    description: 'How often a worker host tries to evaluate the alert rules and send due alerts, spread by a quarter either way (`wharf worker --alert-every`); one host at a time holds the sender\'s lease.',
  },
  WHARF_CONSOLE_URL: {
    kind: 'url',
    defaultText: 'unset: alerts carry no link',
    readBy: ['worker-host'],
    description: 'The web console\'s public base URL as people open it, e.g. `https://wharf.example.com/console` (`wharf worker --console-url`, `wharf start --console-url`): each alert about an issue or a stuck scope links to its page there. Ids only: a link carries no payload, header or secret.',
  },
  PGHOST: {
    kind: 'text',
    default: 'localhost',
    readBy: ['worker-host'],
    description: 'Read by node-postgres for a connection without a host; a worker waiting for its database names it.',
  },
  PGPORT: {
    kind: 'port',
    default: 5432,
    readBy: ['worker-host'],
    description: 'Read by node-postgres for a connection without a port; a worker waiting for its database names it.',
  },
  NEON_HTTP_STAND_IN_PORT: {
    kind: 'port',
    default: 4444,
    readBy: ['development'],
    description: 'The port of `npm run neon-http-stand-in`, the local fake of Neon\'s HTTP query endpoint for `wrangler dev`.',
  },
  'GITHUB_APP_<APP>_WEBHOOK_SECRET': {
    kind: 'secret',
    readBy: ['edge'],
    description: 'The webhook secret of the GitHub App that posts to `/hooks/github/<app>`. Unset: that route answers 404 `unknown-app`.',
  },
  'GITHUB_APP_<APP>_WEBHOOK_SECRET_PREVIOUS': {
    kind: 'secret',
    readBy: ['edge'],
    description: 'The secret it replaced, still accepted while the App\'s settings are changed; remove it after.',
  },
  'GITHUB_APP_<APP>_SOURCE': {
    kind: 'url',
    default: 'https://github.com',
    readBy: ['edge', 'sweeper'],
    description: 'The App\'s server (GitHub Enterprise Server: its URL): the source its deliveries are stored under.',
  },
  'GITHUB_APP_<APP>_ID': {
    kind: 'text',
    readBy: ['sweeper'],
    description: 'The App\'s numeric id (its settings page, "App ID").',
  },
  'GITHUB_APP_<APP>_PRIVATE_KEY': {
    kind: 'secret',
    readBy: ['sweeper'],
    description: 'The App\'s private key, PEM (`\\n` escapes accepted, for a one-line value).',
  },
  'GITHUB_APP_<APP>_API_URL': {
    kind: 'url',
    defaultText: '`https://api.github.com` for github.com, else `<source>/api/v3`',
    readBy: ['sweeper'],
    description: 'The App\'s REST API.',
  },
  'SLACK_APP_<APP>_SIGNING_SECRET': {
    kind: 'secret',
    readBy: ['edge'],
    description: 'The signing secret of the Slack app that posts to `/hooks/slack/<app>`. Unset: that route answers 404 `unknown-app`.',
  },
  'SLACK_APP_<APP>_SIGNING_SECRET_PREVIOUS': {
    kind: 'secret',
    readBy: ['edge'],
    description: 'The signing secret it replaced, still accepted while the app\'s settings are changed; remove it after.',
  },
  'SLACK_APP_<APP>_SOURCE': {
    kind: 'url',
    default: 'https://slack.com',
    readBy: ['edge'],
    description: 'The source the app\'s deliveries are stored under.',
  },
} as const satisfies Record<string, Declaration>;

export type VariableName = keyof typeof environment;

/** The per-app variables: `<APP>` stands for an app's name. */
export type AppVariable = Extract<VariableName, `${string}<APP>${string}`>;

/** An app name (the `:app` of `/hooks/github/:app`) as it appears in its variables. */
export const appNamePattern = /^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/;

/** The name of an app's variable: `<APP>` is the app's name upper-cased, every character outside [A-Z0-9] as `_`. */
export function appVariable(pattern: AppVariable, app: string): string {
  return pattern.replace('<APP>', app.toUpperCase().replace(/[^A-Z0-9]/g, '_'));
}
