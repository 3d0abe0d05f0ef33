import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { CircuitBreaker, Contract, Mutex, Publisher, RateLimit, Retry, Saga, Timeout } from "warp-effect"
import { HolderCounter } from "../support/holders.js"
import { backends, deploy, pair, until, withWorker } from "./env.js"

const Step = Schema.Struct({ order: Schema.String, n: Schema.Number, action: Schema.Literals(["ok", "fail", "reschedule"]) })

for (const [name, infra] of backends) {
  describe(`sagas on ${name}`, () => {
    it.live("serialize per correlation on their own mutex, reschedule themselves, and no outer policy (declared or global) applies", () => {
      // every family declared on the contract, and global defaults: a saga follows none of them
      const Order = Contract.job("OrderSaga", Step, {
        policy: [Mutex("orders", { mode: "Skip" }), Retry(3), Timeout("40 millis"), RateLimit("orders", 1, "1 minute"), CircuitBreaker("orders", 1, "1 minute")]
      })
      const holders = new HolderCounter()
      // the first steps of orders A and B wait (bounded) to be running together
      const together = pair()
      const meet = (order: string, n: number) => (n !== 1 ? Effect.void : order === "A" ? together.left : order === "B" ? together.right : Effect.void)
      const saga = Saga.saga(Order, {
        correlate: ({ order }) => order,
        run: ({ action, n, order }, a) =>
          holders.hold("all", holders.hold(order, Effect.andThen(meet(order, n), Effect.sleep("80 millis")))).pipe(
            Effect.andThen(
              Effect.suspend((): Effect.Effect<Saga.SagaStep, string> =>
                action === "fail"
                  ? Effect.fail("step failed")
                  : Effect.succeed(
                      action === "reschedule" && a.attempt === 1
                        ? Saga.SagaStep.Reschedule({ after: "30 millis", reason: "waiting for payment" })
                        : Saga.SagaStep.Complete()
                    )
              )
            )
          )
      })
      return Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const [a1, a2, b1, b2, c1] = yield* Effect.forEach(
          [
            { order: "A", n: 1, action: "ok" },
            { order: "A", n: 2, action: "ok" },
            { order: "B", n: 1, action: "ok" },
            { order: "B", n: 2, action: "fail" },
            { order: "C", n: 1, action: "reschedule" }
          ] as const,
          (s) => p.enqueue(Order, s)
        )
        yield* withWorker(
          Effect.forEach([a1, a2, b1, b2, c1], (id) => until(id!, (d) => d.job.state === "Succeeded" || d.job.state === "Failed" || d.job.state === "Deleted")),
          { concurrency: 4 }
        )
        // its own per-correlation mutex: never two steps of one order at once ...
        expect(holders.max.get("A")).toBe(1)
        expect(holders.max.get("B")).toBe(1)
        // ... while different orders ran side by side (the contract's Mutex('orders', Skip) would have dropped them)
        expect(holders.max.get("all")).toBeGreaterThan(1)
        for (const id of [a1, a2, b1]) {
          const d = yield* until(id!, () => true)
          // an 80 ms step outlived the declared 40 ms timeout: not applied; nor the rate limit of 1 start
          expect(d.job.state).toBe("Succeeded")
          // no stamp: the row still says what it said at publish
          expect(d.job.metadata).toEqual({ policies: {} })
        }
        // a failed step is not retried (contract Retry(3), global Retry(5))
        const failed = yield* until(b2!, () => true)
        expect(failed.job.state).toBe("Failed")
        // (one attempt: a step sent back because its correlation was busy never ran, so it is not an attempt)
        expect(failed.job.attempt).toBe(1)
        // the saga manages its own reschedules
        const c = yield* until(c1!, () => true)
        expect(c.job.state).toBe("Succeeded")
        expect(c.logs.filter((l) => l.kind === "Requeued").map((l) => l.message)).toEqual(["waiting for payment"])
      }).pipe(Effect.provide(deploy({ handlers: [saga], globals: [Retry(5), Timeout("20 millis"), CircuitBreaker("global", 1, "1 minute")] })), Effect.provide(infra()))
    })
  })
}
