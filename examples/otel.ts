import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { ConsoleSpanExporter, SimpleSpanProcessor, type SpanExporter } from "@opentelemetry/sdk-trace-base"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { pathToFileURL } from "node:url"
import { Contract, Handler, JobStore, Mutex, Publisher, Warp } from "warp-effect"

const SendInvoice = Contract.job("SendInvoice", Schema.Struct({ customerId: Schema.Number }), {
  policy: [Mutex("invoice-mailer")]
})
const sendInvoice = Handler.job(SendInvoice, ({ customerId }) => Effect.log(`invoice for ${customerId}`))

// warp's spans (warp.enqueue, warp.claim, warp.attempt, warp.admission) are Effect spans: the
// OpenTelemetry tracer of NodeSdk.layer receives them and hands them to your exporter (OTLP, Jaeger, ...).
// Provide it to the Warp Layer (not beside it), so the worker's fibers trace with it.
export const Tracing = (exporter: SpanExporter) =>
  NodeSdk.layer(() => ({ resource: { serviceName: "invoices" }, spanProcessor: new SimpleSpanProcessor(exporter) }))

// In memory so that it runs anywhere; Warp.layer over a SqlClient is wired the same way.
export const WarpLive = Warp.layerMemory({ handlers: [sendInvoice], worker: { concurrency: 2, pollInterval: "20 millis" } })

export const main = Effect.gen(function* () {
  const publisher = yield* Publisher.Publisher
  const store = yield* JobStore.JobStore
  const id = yield* publisher.enqueue(SendInvoice, { customerId: 123 })
  const state = yield* store.get(id).pipe(
    Effect.map((detail) => (detail._tag === "Some" ? detail.value.job.state : "missing")),
    Effect.delay("20 millis"),
    Effect.repeat({ until: (state) => state === "Succeeded" || state === "Failed" })
  )
  return { id, state }
}).pipe(Effect.withSpan("invoices.run"))

// `npx tsx examples/otel.ts` prints every finished span as it ends
if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  NodeRuntime.runMain(main.pipe(Effect.provide(WarpLive.pipe(Layer.provideMerge(Tracing(new ConsoleSpanExporter()))))))
}
