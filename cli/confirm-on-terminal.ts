// A yes/no question for the verbs that change many rows at once (bulk
// replays): asked on a terminal, refused in a script without --yes.
import { createInterface } from 'node:readline';

/**
 * Asks a yes/no question on the terminal (stdin, the question on stderr);
 * anything but y or yes, Ctrl-C and Ctrl-D included, is no.
 */
export function confirmOnTerminal(question: string): Promise<boolean> {
  const terminal = createInterface({ input: process.stdin, output: process.stderr });
  return new Promise<boolean>((resolve) => {
    terminal.once('close', () => resolve(false));
    terminal.once('SIGINT', () => terminal.close());
    terminal.question(question, (answer) => {
      resolve(/^y(es)?$/i.test(answer.trim()));
      terminal.close();
    });
  });
}
