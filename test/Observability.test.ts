import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as References from "effect/References"
import * as Schema from "effect/Schema"
import * as Tracer from "effect/Tracer"
import { Contract, Handler, JobParameters, Publisher, Semaphore, Warp, Worker } from "warp-effect"
import { detail, drained } from "./support/runtime.js"

const Traced = Contract.job("TracedJob", Schema.Struct({ i: Schema.Number }), { policy: [Semaphore("traced:a", 2)] })

/** A tracer that hands out Effect's native spans and keeps every span it started. */
const recordingTracer = (spans: Array<Tracer.Span>) =>
  Effect.map(Effect.tracer, (native) =>
    Tracer.make({
      span(options) {
        const span = native.span(options)
        spans.push(span)
        return span
      },
      context: native.context
    })
  )

const attrs = (span: Tracer.Span) => Object.fromEntries(span.attributes)

describe("observability", () => {
  it.live("spans for enqueue, claim, attempt and admission with job id, type, key, limit, slot, outcome and wait; log annotations; metrics per type and key family", () => {
    const spans: Array<Tracer.Span> = []
    const logs: Array<{ message: unknown; annotations: Record<string, unknown> }> = []
    const logger = Logger.make(({ fiber, message }) => {
      logs.push({ message, annotations: { ...fiber.getRef(References.CurrentLogAnnotations) } })
    })
    const handler = Handler.job(Traced, ({ i }) => Effect.log(`handling ${i}`))
    // read as a user would: the public counter, with Effect's own `Metric.withAttributes`
    const attemptsOf = (outcome: string) =>
      Metric.value(Worker.attemptsTotal.pipe(Metric.withAttributes({ type: "TracedJob", key_family: "traced", outcome }))).pipe(
        Effect.map((s) => s.count)
      )
    return Effect.gen(function* () {
      const before = yield* attemptsOf("Succeeded")
      const publisher = yield* Publisher.Publisher
      const id = yield* publisher.enqueue(Traced, { i: 1 })
      const other = yield* publisher.enqueue(Traced, { i: 2 }, JobParameters.make().withSemaphore("traced:b", 3))
      yield* drained(10_000)
      expect((yield* detail(id)).job.state).toBe("Succeeded")

      const named = (name: string) => spans.filter((s) => s.name === name)
      const enqueue = named("warp.enqueue").find((s) => attrs(s)["warp.job.id"] === id)
      expect(enqueue && attrs(enqueue)).toMatchObject({ "warp.job.type": "TracedJob", "warp.job.id": id })
      expect(enqueue?.kind).toBe("producer")
      expect(named("warp.claim").some((s) => Number(attrs(s)["warp.claim.rows"]) >= 1)).toBe(true)

      const attempt = named("warp.attempt").find((s) => attrs(s)["warp.job.id"] === id)!
      expect(attrs(attempt)).toMatchObject({
        "warp.job.id": id,
        "warp.job.type": "TracedJob",
        "warp.job.attempt": 1,
        "warp.outcome": "Succeeded",
        "warp.concurrency.key": "traced:a",
        "warp.concurrency.limit": 2
      })
      const admission = named("warp.admission").find((s) => attrs(s)["warp.job.id"] === id)!
      expect(attrs(admission)).toMatchObject({ "warp.concurrency.key": "traced:a", "warp.concurrency.limit": 2, "warp.concurrency.admission": "Acquired" })
      expect(attrs(admission)["warp.concurrency.slot"]).toBeTypeOf("number")
      expect(attrs(admission)["warp.wait_ms"]).toBeGreaterThanOrEqual(0)
      // the admission runs inside the attempt
      expect(Option.getOrUndefined(admission.parent)?.spanId).toBe(attempt.spanId)
      // the enqueue-time key is on the other job's admission
      expect(named("warp.admission").some((s) => attrs(s)["warp.job.id"] === other && attrs(s)["warp.concurrency.key"] === "traced:b")).toBe(true)

      const handled = logs.find((l) => l.message === "handling 1" || (Array.isArray(l.message) && l.message[0] === "handling 1"))!
      expect(handled.annotations).toMatchObject({ "warp.job.id": id, "warp.job.type": "TracedJob", "warp.concurrency.key": "traced:a" })

      expect((yield* attemptsOf("Succeeded")) - before).toBe(1)
    }).pipe(
      Effect.provide(Warp.layerMemory({ handlers: [handler], worker: { concurrency: 2, pollInterval: "5 millis" } })),
      Effect.provide(Logger.layer([logger])),
      Effect.withTracer(Effect.runSync(recordingTracer(spans)))
    )
  })
})

