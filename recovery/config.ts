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

const appName = /^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/;

export function envStem(app: string): string {
  return `GITHUB_APP_${app.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_`;
}

export function readGitHubAppConfig(env: RecoveryEnv, app: string): GitHubAppConfig {
  if (!appName.test(app)) throw new RecoveryConfigError(`not an app name: ${JSON.stringify(app)}`);
  const stem = envStem(app);
  const value = (name: string): string | undefined => {
    const text = env[`${stem}${name}`]?.trim();
    return text ? text : undefined;
  };
  const appId = value('ID');
  if (!appId) throw new RecoveryConfigError(`set ${stem}ID to the GitHub App's id`);
  if (!/^[1-9]\d{0,17}$/.test(appId)) throw new RecoveryConfigError(`${stem}ID must be the App's numeric id`);
  const privateKey = value('PRIVATE_KEY')?.replace(/\\n/g, '\n');
  if (!privateKey) throw new RecoveryConfigError(`set ${stem}PRIVATE_KEY to the GitHub App's private key (PEM)`);
  if (!privateKey.includes('PRIVATE KEY-----')) {
    // Never echo the value: it is a secret even when malformed.
    throw new RecoveryConfigError(`${stem}PRIVATE_KEY is not a PEM private key`);
  }
  // Exactly as the edge reads it: it is the key the inbox stores deliveries under.
  const source = env[`${stem}SOURCE`] || 'https://github.com';
  const apiUrl = (value('API_URL') ?? (source === 'https://github.com' ? 'https://api.github.com' : `${source}/api/v3`))
    .replace(/\/+$/, '');
  for (const [name, url] of [['SOURCE', source], ['API_URL', apiUrl]] as const) {
    if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) {
      throw new RecoveryConfigError(`${stem}${name} must be an http(s) URL`);
    }
  }
  return { app, appId, privateKey, source, apiUrl };
}

/** The apps named in a list such as WHARF_SWEEP_APPS (`acme, other`). */
export function parseAppList(text: string | undefined): string[] {
  return (text ?? '').split(',').map((name) => name.trim()).filter((name) => name !== '');
}
