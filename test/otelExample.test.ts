/**
 * examples/otel.ts, with its exporter swapped for an in-memory one: the OpenTelemetry SDK receives
 * warp's spans (producer, claim, admission, attempt) with the job's id, type, key and outcome.
 */
import { InMemorySpanExporter, type ReadableSpan } from "@opentelemetry/sdk-trace-base"
import { SpanKind } from "@opentelemetry/api"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { describe, expect, it } from "vitest"
import { main, Tracing, WarpLive } from "../examples/otel.js"

/** The SDK shuts the exporter down when the Layer closes, and InMemorySpanExporter then forgets its spans: keep them. */
class KeptSpans extends InMemorySpanExporter {
  override shutdown(): Promise<void> {
    return Promise.resolve()
  }
}

describe("examples/otel.ts", () => {
  it("exports warp.enqueue, warp.claim, warp.admission and warp.attempt spans with the job's attributes", async () => {
    const exporter = new KeptSpans()
    const { id, state } = await Effect.runPromise(main.pipe(Effect.provide(WarpLive.pipe(Layer.provideMerge(Tracing(exporter))))))
    expect(state).toBe("Succeeded")
    const spans = exporter.getFinishedSpans()
    const named = (name: string): Array<ReadableSpan> => spans.filter((s) => s.name === name)
    expect(new Set(spans.map((s) => s.name))).toEqual(new Set(["invoices.run", "warp.enqueue", "warp.claim", "warp.admission", "warp.attempt"]))

    const [enqueue] = named("warp.enqueue")
    expect(enqueue!.kind).toBe(SpanKind.PRODUCER)
    expect(enqueue!.attributes).toMatchObject({ "warp.job.id": id, "warp.job.type": "SendInvoice" })
    // the enqueue is a child of the program's span
    expect(enqueue!.parentSpanContext?.spanId).toBe(named("invoices.run")[0]!.spanContext().spanId)

    const attempts = named("warp.attempt")
    expect(attempts).toHaveLength(1)
    expect(attempts[0]!.attributes).toMatchObject({
      "warp.job.id": id,
      "warp.job.type": "SendInvoice",
      "warp.job.attempt": 1,
      "warp.concurrency.key": "invoice-mailer",
      "warp.concurrency.limit": 1,
      "warp.outcome": "Succeeded"
    })

    const [admission] = named("warp.admission")
    expect(admission!.attributes).toMatchObject({ "warp.job.id": id, "warp.concurrency.key": "invoice-mailer", "warp.concurrency.admission": "Acquired", "warp.concurrency.slot": 0 })
    // the admission happens inside the attempt
    expect(admission!.spanContext().traceId).toBe(attempts[0]!.spanContext().traceId)
    expect(admission!.parentSpanContext?.spanId).toBe(attempts[0]!.spanContext().spanId)

    // one claim span returned the job's row
    expect(named("warp.claim").some((s) => s.attributes["warp.claim.rows"] === 1)).toBe(true)
    expect(spans.find((s) => s.resource.attributes["service.name"] !== "invoices")).toBeUndefined()
  })
})
