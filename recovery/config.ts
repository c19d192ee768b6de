// A GitHub App's sweeper configuration, read from the environment (the App's
// secrets live in the process's configuration, never in the database):
// GITHUB_APP_<APP>_ID, _PRIVATE_KEY, _SOURCE and _API_URL, declared with
// their meanings and defaults in db/environment.ts (docs/configuration.md).
// <APP> is named as for the edge's secrets, so one App's edge secret and
// sweeper credentials sit side by side.
import { appNamePattern, appVariable, environment, type AppVariable } from '../db/environment.js';
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

/** Refuses a name that cannot be an App's (the :app of /hooks/github/:app). */
export function checkAppName(app: string): void {
  if (!appNamePattern.test(app)) throw new RecoveryConfigError(`not an app name: ${JSON.stringify(app)}`);
}

export function readGitHubAppConfig(env: RecoveryEnv, app: string): GitHubAppConfig {
  checkAppName(app);
  const patterns = {
    ID: 'GITHUB_APP_<APP>_ID', PRIVATE_KEY: 'GITHUB_APP_<APP>_PRIVATE_KEY',
    SOURCE: 'GITHUB_APP_<APP>_SOURCE', API_URL: 'GITHUB_APP_<APP>_API_URL',
  } as const satisfies Record<string, AppVariable>;
  type Part = keyof typeof patterns;
  const variable = (part: Part): string => appVariable(patterns[part], app);
  const fail = (name: Part, problem: string): never => {
    throw new RecoveryConfigError(`GitHub App ${app}: ${problem}`, app, variable(name));
  };
  const value = (name: Part): string | undefined => {
    const text = env[variable(name)]?.trim();
    return text ? text : undefined;
  };
  const appId = value('ID');
  if (!appId) fail('ID', `set ${variable('ID')} to the GitHub App's id`);
  if (!/^[1-9]\d{0,17}$/.test(appId!)) fail('ID', `${variable('ID')} must be the App's numeric id`);
  const privateKey = value('PRIVATE_KEY')?.replace(/\\n/g, '\n');
  if (!privateKey) fail('PRIVATE_KEY', `set ${variable('PRIVATE_KEY')} to the GitHub App's private key (PEM)`);
  checkPrivateKey(privateKey!, (problem) => fail('PRIVATE_KEY', `${variable('PRIVATE_KEY')} ${problem}`));
  // Exactly as the edge reads it: it is the key the inbox stores deliveries under.
  const source = env[variable('SOURCE')] || environment['GITHUB_APP_<APP>_SOURCE'].default;
  const apiUrl = (value('API_URL') ?? (source === 'https://github.com' ? 'https://api.github.com' : `${source}/api/v3`))
    .replace(/\/+$/, '');
  for (const [name, url] of [['SOURCE', source], ['API_URL', apiUrl]] as const) {
    if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) fail(name, `${variable(name)} must be an http(s) URL`);
    // The URL is named in messages (what could not be reached): it holds no secret.
    if (new URL(url).username || new URL(url).password) fail(name, `${variable(name)} must not hold a user name or password`);
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
