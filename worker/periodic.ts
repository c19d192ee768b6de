// Runs a task every `every` ms (the first time after `firstAfter`), never
// two at once, until stopped.
export interface Periodic {
  stop(): Promise<void>;
}

export function runPeriodically(every: () => number, task: () => Promise<void>, firstAfter: () => number = every): Periodic {
  let running: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const schedule = (delay: number): void => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = task().finally(() => {
        running = undefined;
        schedule(every());
      });
    }, delay);
  };
  schedule(firstAfter());
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
