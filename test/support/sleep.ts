// Waiting a while in a test: only to let time pass that the behaviour under
// test is about (a lease running out, a handler's pause), never as a verdict;
// conditions are polled for with waitFor (worker-inbox.ts).

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
