import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { Job } from "warp-effect"
import { JobStore } from "../../src/internal/store/JobStore.js"

/** Waits (polling the store every `poll`, bounded) until no job is pending or processing. */
export const drained = (timeoutMs = 30_000, poll: Duration.Input = "20 millis") =>
  Effect.gen(function* () {
    const store = yield* JobStore
    const start = Date.now()
    while (true) {
      const c = yield* store.countByState
      if (c.Enqueued + c.Scheduled + c.Processing === 0) return c
      if (Date.now() - start > timeoutMs) return yield* Effect.die(new Error(`not drained after ${timeoutMs} ms: ${JSON.stringify(c)}`))
      yield* Effect.sleep(poll)
    }
  })

/** The state and audit trail of one job. */
export const detail = (id: string) =>
  Effect.flatMap(JobStore, (s) => s.get(id)).pipe(Effect.map(Option.getOrThrow))

/** The state of one job. */
export const stateOf = (id: string): Effect.Effect<Job.JobState, unknown, JobStore> => Effect.map(detail(id), (d) => d.job.state)

/** What `until` read last, for its failure message (a job's detail as its state and last audit entries). */
const describe = (a: unknown): string => {
  const d = a as { job?: { id?: string; state?: string }; logs?: ReadonlyArray<{ kind: string; message: string }> }
  const text =
    d?.job?.state !== undefined && Array.isArray(d.logs)
      ? JSON.stringify({ id: d.job.id, state: d.job.state, logs: d.logs.slice(-6).map((l) => `${l.kind}: ${l.message}`) })
      : JSON.stringify(a)
  return (text ?? String(a)).slice(0, 2_000)
}

/** Polls `read` every 10 ms until `done` holds (bounded: dies after `timeoutMs`, default 20 s). */
export const until = <A, E, R>(read: Effect.Effect<A, E, R>, done: (a: A) => boolean, timeoutMs = 20_000) =>
  Effect.gen(function* () {
    const start = Date.now()
    while (true) {
      const a = yield* read
      if (done(a)) return a
      if (Date.now() - start > timeoutMs) return yield* Effect.die(new Error(`condition not reached in ${timeoutMs} ms; last read: ${describe(a)}`))
      yield* Effect.sleep("10 millis")
    }
  })

export { Layer }
