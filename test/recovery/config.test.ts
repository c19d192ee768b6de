// A GitHub App's sweeper configuration, read from the environment: each
// problem names the App and the variable to fix, and never quotes a value
// (a private key is a secret even when malformed).
import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { readGitHubAppConfig, RecoveryConfigError } from '../../recovery/index.js';
import { appKeys } from './rig.js';

function problem(env: Record<string, string>): RecoveryConfigError {
  try {
    readGitHubAppConfig({ GITHUB_APP_ACME_ID: '42', GITHUB_APP_ACME_PRIVATE_KEY: appKeys.privateKey, ...env }, 'acme');
  } catch (error) {
    if (error instanceof RecoveryConfigError) return error;
    throw error;
  }
  throw new Error('the configuration was accepted');
}

describe('a GitHub App\'s configuration', () => {
  it('is read with its key as GitHub hands it out, also on one line with \\n escapes', () => {
    const oneLine = appKeys.privateKey.replace(/\n/g, '\\n');
    expect(readGitHubAppConfig({ GITHUB_APP_ACME_ID: '42', GITHUB_APP_ACME_PRIVATE_KEY: oneLine }, 'acme'))
      .toMatchObject({ app: 'acme', appId: '42', apiUrl: 'https://api.github.com', source: 'https://github.com' });
  });

  it('refuses a key that cannot sign the App\'s JWT, naming the variable and never the key', () => {
    const secretBody = 'c2VjcmV0LWJ1dC1ub3QtYS1rZXk';
    const cases: [string, RegExp][] = [
      [`-----BEGIN RSA PRIVATE KEY-----\n${secretBody}\n-----END RSA PRIVATE KEY-----`, /does not hold a private key that can be read/],
      [secretBody, /is not a PEM private key/],
      [generateKeyPairSync('ec', { namedCurve: 'P-256', privateKeyEncoding: { type: 'sec1', format: 'pem' },
                                   publicKeyEncoding: { type: 'spki', format: 'pem' } }).privateKey, /holds a key of type ec; a GitHub App's private key is RSA/],
      [generateKeyPairSync('rsa', { modulusLength: 2048, publicKeyEncoding: { type: 'spki', format: 'pem' },
                                    privateKeyEncoding: { type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'pw' } }).privateKey,
       /is encrypted/],
    ];
    for (const [key, says] of cases) {
      const error = problem({ GITHUB_APP_ACME_PRIVATE_KEY: key });
      expect(error.message).toMatch(/^GitHub App acme: GITHUB_APP_ACME_PRIVATE_KEY /);
      expect(error.message).toMatch(says);
      expect(error).toMatchObject({ app: 'acme', variable: 'GITHUB_APP_ACME_PRIVATE_KEY' });
      expect(error.message).not.toContain(secretBody);
      expect(error.message).not.toContain('MII');
    }
  });

  it('refuses an API URL with a password in it, without quoting it', () => {
    const error = problem({ GITHUB_APP_ACME_API_URL: 'https://bot:hunter2@ghe.example.com/api/v3' });
    expect(error).toMatchObject({ variable: 'GITHUB_APP_ACME_API_URL' });
    expect(error.message).not.toContain('hunter2');
  });
});
