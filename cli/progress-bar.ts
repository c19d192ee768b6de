// A progress bar on stderr: redrawn in place on a terminal, a line per change
// elsewhere (logs, CI), so that stdout keeps only the result.
let lastLine = '';

export function printProgress(done: number, total: number, what: string): void {
  const share = total === 0 ? 1 : Math.min(1, done / total);
  const summary = `${what} ${done} of ${total} (${Math.round(share * 100)} %)`;
  if (process.stderr.isTTY) {
    const width = 30;
    const filled = Math.round(share * width);
    process.stderr.write(`\r[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${summary}${share === 1 ? '\n' : ''}`);
    return;
  }
  if (summary === lastLine) return;
  lastLine = summary;
  process.stderr.write(`${summary}\n`);
}
