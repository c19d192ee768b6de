// A GitHub App's sweeper configuration, read from the environment (the App's
// secrets live in the process's configuration, never in the database):
// GITHUB_APP_<APP>_ID, _PRIVATE_KEY, _SOURCE and _API_URL, declared with
// their meanings and defaults in db/environment.ts (docs/configuration.md).
// <APP> is named as for the edge's secrets, so one App's edge secret and
// sweeper credentials sit side by side.
import { appNamePattern, appVariable, environment, type AppVariable } from '../db/environment.js';

export type RecoveryEnv = Record<string, string | undefined>;

export interface GitHubAppConfig {
  /** The name of the App in Wharf (the :app of /hooks/github/:app). */
  app: string;
  appId: string;
  privateKey: string;
  source: string;
  apiUrl: string;
}

/** A configuration the operator has to fix; the message names the variable. */
export class RecoveryConfigError extends Error {
  override name = 'RecoveryConfigError';
}

export function envStem(app: string): string {
  return `GITHUB_APP_${app.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_`;
}

export function readGitHubAppConfig(env: RecoveryEnv, app: string): GitHubAppConfig {
  if (!appNamePattern.test(app)) throw new RecoveryConfigError(`not an app name: ${JSON.stringify(app)}`);
  const name = (variable: AppVariable): string => appVariable(variable, app);
  const value = (variable: AppVariable): string | undefined => {
    const text = env[name(variable)]?.trim();
    return text ? text : undefined;
  };
  const appId = value('GITHUB_APP_<APP>_ID');
  if (!appId) throw new RecoveryConfigError(`set ${name('GITHUB_APP_<APP>_ID')} to the GitHub App's id`);
  if (!/^[1-9]\d{0,17}$/.test(appId)) throw new RecoveryConfigError(`${name('GITHUB_APP_<APP>_ID')} must be the App's numeric id`);
  const privateKey = value('GITHUB_APP_<APP>_PRIVATE_KEY')?.replace(/\\n/g, '\n');
  if (!privateKey) {
    throw new RecoveryConfigError(`set ${name('GITHUB_APP_<APP>_PRIVATE_KEY')} to the GitHub App's private key (PEM)`);
  }
  if (!privateKey.includes('PRIVATE KEY-----')) {
    // Never echo the value: it is a secret even when malformed.
    throw new RecoveryConfigError(`${name('GITHUB_APP_<APP>_PRIVATE_KEY')} is not a PEM private key`);
  }
  // Exactly as the edge reads it: it is the key the inbox stores deliveries under.
  const source = env[name('GITHUB_APP_<APP>_SOURCE')] || environment['GITHUB_APP_<APP>_SOURCE'].default;
  const apiUrl = (value('GITHUB_APP_<APP>_API_URL') ?? (source === 'https://github.com' ? 'https://api.github.com' : `${source}/api/v3`))
    .replace(/\/+$/, '');
  for (const [variable, url] of [['GITHUB_APP_<APP>_SOURCE', source], ['GITHUB_APP_<APP>_API_URL', apiUrl]] as const) {
    if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) {
      throw new RecoveryConfigError(`${name(variable)} must be an http(s) URL`);
    }
  }
  return { app, appId, privateKey, source, apiUrl };
}

/** The apps named in a list such as WHARF_SWEEP_APPS (`acme, other`). */
export function parseAppList(text: string | undefined): string[] {
  return (text ?? '').split(',').map((name) => name.trim()).filter((name) => name !== '');
}
