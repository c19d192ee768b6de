// Runs a task every `every` ms, never two at once, until stopped.
export interface Periodic {
  stop(): Promise<void>;
}

export function runPeriodically(every: () => number, task: () => Promise<void>): Periodic {
  let running: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const schedule = (): void => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = task().finally(() => {
        running = undefined;
        schedule();
      });
    }, every());
  };
  schedule();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
