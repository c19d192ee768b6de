// A real browser for the console's tests: Debian's Chromium, driven by
// playwright-core (browser downloads are not reachable here). A machine
// without it fails the suite with the command that installs it; it never
// skips, so CI cannot pass without running the browser tests.
import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';

export const chromiumPath = process.env.WHARF_CHROMIUM ?? '/usr/bin/chromium';

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(chromiumPath)) {
    throw new Error(`the console's browser tests need Chromium at ${chromiumPath}: run \`apt-get install -y chromium\` `
      + '(.ci/run does), or point WHARF_CHROMIUM at a Chromium binary');
  }
  // --no-sandbox: the tests run as root in a container, where Chromium's sandbox cannot start.
  return chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'], timeout: 60_000 });
}

/** Generous waits for a loaded two-core CI machine. */
export const browserTimeout = 30_000;

/**
 * Reloads `page` until `probe` holds, or fails after `timeout` ms: for pages
 * that show what another process (a worker) changes, and have no script to
 * refresh themselves.
 */
export async function reloadUntil(page: Page, probe: () => Promise<boolean>, what: string, timeout = browserTimeout): Promise<void> {
  const deadline = Date.now() + timeout;
  for (;;) {
    if (await probe()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms waiting for ${what} (at ${page.url()})`);
    await page.waitForTimeout(250);
    await page.reload();
  }
}
