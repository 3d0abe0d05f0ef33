import { expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Contract, Handler, JobStore, Publisher, Semaphore, Warp } from "warp-effect"

const ExportReport = Contract.job("ExportReport", Schema.Struct({ tenant: Schema.String }), {
  policy: [Semaphore("exports", 3)]
})

// A plain test of a handler: the whole of warp in memory (store, publisher, worker, semaphore), no database.
it.live("an enqueued export runs its handler once and ends Succeeded", () =>
  Effect.gen(function* () {
    const ran = yield* Deferred.make<string>()
    const exportReport = Handler.job(ExportReport, ({ tenant }) => Effect.asVoid(Deferred.succeed(ran, tenant)))
    const WarpTest = Warp.layerMemory({ handlers: [exportReport], worker: { pollInterval: "10 millis" } })

    const { tenant, state } = yield* Effect.gen(function* () {
      const publisher = yield* Publisher.Publisher
      const store = yield* JobStore.JobStore
      const id = yield* publisher.enqueue(ExportReport, { tenant: "acme" })
      const tenant = yield* Deferred.await(ran) // the handler ran, with the payload it was given
      // its finalizing write follows the handler: read the row until it says how the job ended
      const state = yield* store.get(id).pipe(
        Effect.map((detail) => (detail._tag === "Some" ? detail.value.job.state : "missing")),
        Effect.repeat({ until: (state) => state === "Succeeded" || state === "Failed" || state === "missing" })
      )
      return { tenant, state }
    }).pipe(Effect.provide(WarpTest))

    expect({ tenant, state }).toEqual({ tenant: "acme", state: "Succeeded" })
  }))
