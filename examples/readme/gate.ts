import { Concurrency, Job } from "warp-effect"

// A full key is data, not an exception: the attempt ends Deleted (Skip) or Requeued (Wait, Fifo) with the
// audit text its trail shows. Match on the outcome (or generate schedules and check the multiset).
export const explain = (outcome: Job.Outcome, key: string, limit: number): string =>
  Job.Outcome.$match(outcome, {
    Succeeded: () => "ran",
    Failed: ({ error }) => `failed: ${error}`,
    Deleted: ({ reason }) => (reason === Concurrency.cancelledText(key, limit) ? `skipped: '${key}' was full` : reason),
    Requeued: ({ reason }) => (reason === Concurrency.requeuedText(key, limit) ? `waits: '${key}' is full` : reason)
  })
