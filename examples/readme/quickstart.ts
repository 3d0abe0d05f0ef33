import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { Contract, Database, Handler, JobStore, Mutex, Publisher, Warp } from "warp-effect"

const SendInvoice = Contract.job("SendInvoice", Schema.Struct({ customerId: Schema.Number }), {
  policy: [Mutex("invoice-mailer")] // one at a time, across every worker and process; surplus skipped
})
const sendInvoice = Handler.job(SendInvoice, ({ customerId }) => Effect.log(`invoice for ${customerId}`))

// Store, publisher, worker with the concurrency addon (PostgreSQL advisory locks), admin limits;
// migrations run when the Layer is built. Its type names what it needs: a SqlClient.
const WarpLive = Warp.layer({ handlers: [sendInvoice], worker: { concurrency: 8 } }).pipe(
  Layer.provide(Database.layerFromEnv("DATABASE_URL"))
)

const main = Effect.gen(function* () {
  const publisher = yield* Publisher.Publisher
  const store = yield* JobStore.JobStore
  const id = yield* publisher.enqueue(SendInvoice, { customerId: 123 })
  // the worker runs it in the background; wait until its row says so
  const readState = store.get(id).pipe(
    Effect.map((detail) => (detail._tag === "Some" ? detail.value.job.state : "missing")),
    Effect.delay("50 millis")
  )
  const state = yield* Effect.repeat(readState, { until: (state) => state === "Succeeded" || state === "Failed" })
  yield* Effect.log(`job ${id}: ${state}`)
})

NodeRuntime.runMain(Effect.provide(main, WarpLive))
