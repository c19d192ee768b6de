import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The package's own directory, the one that holds package.json: two levels
 * up in an installed package (dist/db/), one in a checkout (db/).
 */
function findPackageRoot(): string {
  let directory = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(directory, 'package.json'))) {
    const parent = dirname(directory);
    if (parent === directory) throw new Error('wharf: cannot find the package directory');
    directory = parent;
  }
  return directory;
}

export const packageRoot = findPackageRoot();
