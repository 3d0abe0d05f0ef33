import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { Concurrency, Contract, Database, Handler, JobStorePg, Mutex, Publisher, Registry, SemaphoreProviderPg, Worker } from "warp-effect"

const SendInvoice = Contract.job("SendInvoice", Schema.Struct({ customerId: Schema.Number }), {
  policy: [Mutex("invoice-mailer")] // one at a time, across every worker and process; surplus skipped
})
const sendInvoice = Handler.job(SendInvoice, ({ customerId }) => Effect.log(`invoice for ${customerId}`))

const WarpLive = Publisher.layer.pipe(
  Layer.provideMerge(Worker.layer({ concurrency: 8 })),
  Layer.provideMerge(Registry.layer({ handlers: [sendInvoice] })),
  Layer.provideMerge(Concurrency.layer), // the opt-in addon: gate + admin limits (+ its migration)
  Layer.provideMerge(SemaphoreProviderPg.layer()), // or your own SemaphoreProvider layer
  Layer.provideMerge(JobStorePg.layer), // runs the core migrations
  Layer.provideMerge(Database.layerFromEnv("DATABASE_URL"))
)

const main = Effect.gen(function* () {
  const publisher = yield* Publisher.Publisher
  yield* publisher.enqueue(SendInvoice, { customerId: 123 })
  yield* Effect.sleep("2 seconds") // the worker runs it in the background
})

Effect.runPromise(Effect.provide(main, WarpLive))
