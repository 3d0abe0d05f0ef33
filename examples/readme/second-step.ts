import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { Contract, Database, Handler, Mutex, Publisher, Semaphore, Warp } from "warp-effect"
import { Dashboard } from "warp-effect/dashboard"

const SendInvoice = Contract.job("SendInvoice", Schema.Struct({ customerId: Schema.Number }), {
  policy: [Mutex("invoice-mailer")]
})
const sendInvoice = Handler.job(SendInvoice, ({ customerId }) => Effect.log(`invoice for ${customerId}`))

// A second job: at most 3 exports run at once across every worker and process; the others wait (Wait).
const ExportReport = Contract.job("ExportReport", Schema.Struct({ tenant: Schema.String }))
const exportReport = Handler.job(ExportReport, ({ tenant }) => Effect.log(`exporting ${tenant}`).pipe(Effect.delay("20 seconds")), {
  policy: [Semaphore("exports", 3)]
})

const WarpLive = Warp.layer({ handlers: [sendInvoice, exportReport], worker: { concurrency: 8 } }).pipe(
  Layer.provide(Database.layerFromEnv("DATABASE_URL"))
)
// The dashboard on its own port, loopback only and read-only by default; PORT=0 picks a free port.
const DashboardLive = Dashboard.layer({ port: Number(process.env.PORT ?? 8080) }).pipe(Layer.provideMerge(WarpLive))

const main = Effect.gen(function* () {
  const publisher = yield* Publisher.Publisher
  for (const tenant of ["acme", "globex", "initech", "umbrella", "hooli", "stark"]) {
    yield* publisher.enqueue(ExportReport, { tenant })
  }
  yield* publisher.enqueue(SendInvoice, { customerId: 123 })
  yield* Effect.log(`dashboard: ${yield* Dashboard.url}/keys`) // open it: 3 of 3 slots of 'exports' held, 3 waiting
  return yield* Effect.never // keep the worker and the dashboard up; Ctrl-C stops them gracefully
})

NodeRuntime.runMain(Effect.provide(main, DashboardLive))
