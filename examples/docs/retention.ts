import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { Contract, Database, Handler, JobStore, Warp } from "warp-effect"

// A type whose successes nobody looks at again: gone at the next prune (its failures keep the worker's setting).
export const Ping = Contract.job("Ping", Schema.Struct({ host: Schema.String }), {
  retention: { deleteOnSuccess: true }
})

// A type kept longer: Succeeded 30 days and at most 10,000 of them, Failed 90 days.
export const Invoice = Contract.job("Invoice", Schema.Struct({ id: Schema.String }), {
  retention: { succeeded: { maxAge: "30 days", maxCount: 10_000 }, failed: { maxAge: "90 days" } }
})

// Every other type: the defaults, but Succeeded kept 6 hours; tombstones 3 days.
export const WarpLive = Warp.layer({
  handlers: [Handler.job(Ping, () => Effect.void), Handler.job(Invoice, () => Effect.void)],
  worker: { retention: { succeeded: { maxAge: "6 hours" }, tombstones: "3 days" } }
}).pipe(Layer.provide(Database.layerFromEnv("DATABASE_URL")))

// A pruned job: `get` fails with JobExpired (how it ended, when, when it was pruned), not "not found".
export const describeJob = (id: string) =>
  Effect.flatMap(JobStore.JobStore, (store) => store.get(id)).pipe(
    Effect.map((detail) => (Option.isSome(detail) ? `${id}: ${detail.value.job.state}` : `${id}: no such job`)),
    Effect.catchTag("JobExpired", (e) => Effect.succeed(`${id}: ended ${e.state} at ${e.finishedAt.toISOString()}, removed ${e.prunedAt.toISOString()}`))
  )
