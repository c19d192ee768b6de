// A GitHub App's sweeper configuration, read from the environment (the App's
// secrets live in the process's configuration, never in the database):
//
//   GITHUB_APP_<APP>_ID           the App's id (GitHub's App settings page, "App ID")
//   GITHUB_APP_<APP>_PRIVATE_KEY  the App's private key (PEM; `\n` escapes are accepted,
//                                 as a one-line environment value needs them)
//   GITHUB_APP_<APP>_SOURCE       its server, as the edge stores it (default https://github.com)
//   GITHUB_APP_<APP>_API_URL      its REST API (default https://api.github.com for github.com,
//                                 <source>/api/v3 for GitHub Enterprise Server)
//
// <APP> is named as in edge/settings.ts: the route's :app upper-cased, every
// character outside [A-Z0-9] as `_`, so one App's edge secret and sweeper
// credentials sit side by side.

import { createPrivateKey, type KeyObject } from 'node:crypto';

export type RecoveryEnv = Record<string, string | undefined>;

export interface GitHubAppConfig {
  /** The name of the App in Wharf (the :app of /hooks/github/:app). */
  app: string;
  appId: string;
  privateKey: string;
  source: string;
  apiUrl: string;
}

/**
 * A configuration the operator has to fix. The message names the App and,
 * for an App's credentials, the variable (`variable`); it never quotes a
 * value, which is a secret even when malformed.
 */
export class RecoveryConfigError extends Error {
  override name = 'RecoveryConfigError';
  constructor(message: string, readonly app?: string, readonly variable?: string) {
    super(message);
  }
}

const appName = /^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/;

export function envStem(app: string): string {
  return `GITHUB_APP_${app.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_`;
}

/** Refuses a name that cannot be an App's (the :app of /hooks/github/:app). */
export function checkAppName(app: string): void {
  if (!appName.test(app)) throw new RecoveryConfigError(`not an app name: ${JSON.stringify(app)}`);
}

export function readGitHubAppConfig(env: RecoveryEnv, app: string): GitHubAppConfig {
  checkAppName(app);
  const stem = envStem(app);
  const fail = (name: string, problem: string): never => {
    throw new RecoveryConfigError(`GitHub App ${app}: ${problem}`, app, `${stem}${name}`);
  };
  const value = (name: string): string | undefined => {
    const text = env[`${stem}${name}`]?.trim();
    return text ? text : undefined;
  };
  const appId = value('ID');
  if (!appId) fail('ID', `set ${stem}ID to the GitHub App's id`);
  if (!/^[1-9]\d{0,17}$/.test(appId!)) fail('ID', `${stem}ID must be the App's numeric id`);
  const privateKey = value('PRIVATE_KEY')?.replace(/\\n/g, '\n');
  if (!privateKey) fail('PRIVATE_KEY', `set ${stem}PRIVATE_KEY to the GitHub App's private key (PEM)`);
  checkPrivateKey(privateKey!, (problem) => fail('PRIVATE_KEY', `${stem}PRIVATE_KEY ${problem}`));
  // Exactly as the edge reads it: it is the key the inbox stores deliveries under.
  const source = env[`${stem}SOURCE`] || 'https://github.com';
  const apiUrl = (value('API_URL') ?? (source === 'https://github.com' ? 'https://api.github.com' : `${source}/api/v3`))
    .replace(/\/+$/, '');
  for (const [name, url] of [['SOURCE', source], ['API_URL', apiUrl]] as const) {
    if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) fail(name, `${stem}${name} must be an http(s) URL`);
    // The URL is named in messages (what could not be reached): it holds no secret.
    if (new URL(url).username || new URL(url).password) fail(name, `${stem}${name} must not hold a user name or password`);
  }
  return { app, appId: appId!, privateKey: privateKey!, source, apiUrl };
}

/**
 * The App's key must be one the JWT can be signed with: a PEM RSA private key
 * that decodes (GitHub signs App JWTs with RS256). Found now, a key that does
 * not is a configuration error, not a GitHub that "cannot be reached" on each
 * request. `fail` gets what is wrong, never the key.
 */
function checkPrivateKey(pem: string, fail: (problem: string) => never): void {
  if (!/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(pem)) {
    fail('is not a PEM private key (-----BEGIN RSA PRIVATE KEY----- as GitHub hands it out)');
  }
  if (pem.includes('-----BEGIN ENCRYPTED PRIVATE KEY-----')) {
    fail('is encrypted; give the key as GitHub hands it out (-----BEGIN RSA PRIVATE KEY-----)');
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch {
    fail('does not hold a private key that can be read: its PEM body does not decode (download a new key from the App\'s settings)');
  }
  if (key!.asymmetricKeyType !== 'rsa') {
    fail(`holds a key of type ${key!.asymmetricKeyType ?? 'unknown'}; a GitHub App's private key is RSA`);
  }
}

/** The apps named in a list such as WHARF_SWEEP_APPS (`acme, other`). */
export function parseAppList(text: string | undefined): string[] {
  return (text ?? '').split(',').map((name) => name.trim()).filter((name) => name !== '');
}
