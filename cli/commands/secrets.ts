// `wharf secrets reencrypt`: after a new key heads WHARF_SECRET_KEYS, every
// stored signing key is encrypted again under it (plaintext stored before
// release 0.2.0 included); then the older keys can leave the ring.
import { Command } from 'commander';
import { parseKeyRing } from '../../db/secret-box.js';
import { reencryptSigningKeys } from '../../operator/sql/connection-secrets.js';
import { operatorCommand, printJson, usageError, withDatabase, type OperatorOptions } from './operator-support.js';

export function secretsCommand(): Command {
  const command = new Command('secrets').description('connection secrets at rest');
  command.addCommand(operatorCommand('reencrypt', 'encrypt every stored signing key under the newest key of WHARF_SECRET_KEYS')
    .action((options: OperatorOptions) => withDatabase(options, async (db) => {
      const keyRing = await parseKeyRing(process.env.WHARF_SECRET_KEYS);
      if (!keyRing) throw usageError('set WHARF_SECRET_KEYS (newest key first)');
      const result = await reencryptSigningKeys(db, keyRing, (progress) => {
        if (!options.json && process.stderr.isTTY) process.stderr.write(`\rre-encrypted ${progress.reencrypted}/${progress.total}`);
      });
      if (options.json) printJson({ ...result, key: keyRing.keys[0]!.id });
      else process.stdout.write(`${result.reencrypted} of ${result.total} signing keys re-encrypted under ${keyRing.keys[0]!.id}\n`);
    })));
  return command;
}
