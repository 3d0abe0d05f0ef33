import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Contract, Handler, Job, JobParameters, Mutex, Policy, Publisher, Retry, Timeout } from "warp-effect"
import { requeuedText } from "../../src/internal/concurrency/ConcurrencyBehavior.js"
import * as RetryBehavior from "../../src/internal/retry/RetryBehavior.js"
import { backends, deploy, metadataOf, until, withWorker } from "./env.js"

const P = Schema.Struct({ n: Schema.Number })

/** Milliseconds between consecutive claims of a job (a retry is decided after its claim, and delayed from then). */
const gapsBetweenClaims = (logs: ReadonlyArray<Job.JobLog>) => {
  const claims = logs.filter((l) => l.kind === "Processing").map((l) => l.at.getTime())
  return claims.slice(1).map((t, i) => t - claims[i]!)
}

describe("retry backoff", () => {
  it.effect("delays grow by the factor from the initial delay and stop at the cap", () =>
    Effect.gen(function* () {
      const policy = new Policy.RetryPolicy({ maxAttempts: 6, initialDelayMs: 100, factor: 3, maxDelayMs: 1000 })
      const delays = yield* Effect.forEach([1, 2, 3, 4, 5], (n) => Effect.map(RetryBehavior.delayAfter(policy, n), Duration.toMillis))
      expect(delays).toEqual([100, 300, 900, 1000, 1000])
    }))
})

for (const [name, infra] of backends) {
  describe(`retry and timeout on ${name}`, () => {
    it.live("a failing job is rescheduled with backoff up to maxAttempts, then Failed; a success stops retrying", () => {
      const Flaky = Contract.job("Flaky", P, { policy: [Retry(3, { initialDelay: "40 millis", factor: 2 })] })
      const runs = new Map<number, number>()
      const handler = Handler.job(Flaky, ({ n }, a) =>
        Effect.sync(() => runs.set(n, (runs.get(n) ?? 0) + 1)).pipe(Effect.andThen(n === 2 && a.attempt === 2 ? Effect.void : Effect.fail(`no (${a.attempt})`)))
      )
      return Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const failing = yield* p.enqueue(Flaky, { n: 1 })
        const recovering = yield* p.enqueue(Flaky, { n: 2 })
        yield* withWorker(
          Effect.andThen(
            until(failing, (d) => d.job.state === "Failed"),
            until(recovering, (d) => d.job.state === "Succeeded")
          )
        )
        const d = yield* until(failing, () => true)
        expect(d.job.attempt).toBe(3)
        expect(runs.get(1)).toBe(3)
        const requeues = d.logs.filter((l) => l.kind === "Requeued").map((l) => l.message)
        expect(requeues.map((m) => m.split(" after")[0])).toEqual(["Retry 2/3 in 40ms", "Retry 3/3 in 80ms"])
        expect(requeues[1]).toContain("no (2)")
        expect(d.logs.at(-1)).toMatchObject({ kind: "Failed" })
        expect(d.logs.at(-1)!.message).toContain("no (3)")
        // the backoff held: no attempt was claimed before its delay had passed
        const gaps = gapsBetweenClaims(d.logs)
        expect(gaps[0]).toBeGreaterThanOrEqual(40 - 5)
        expect(gaps[1]).toBeGreaterThanOrEqual(80 - 5)
        expect(runs.get(2)).toBe(2)
        expect((yield* until(recovering, () => true)).job.attempt).toBe(2)
      }).pipe(Effect.provide(deploy({ handlers: [handler] })), Effect.provide(infra()))
    })

    it.live("a PerAttempt timeout interrupts the handler, and the concurrency slot it held is free for the next job of the key", () => {
      const Hang = Contract.job("Hang", P, { policy: [Mutex("one-at-a-time", { mode: "Wait" })] })
      return Effect.gen(function* () {
        const inside = yield* Deferred.make<void>()
        const interrupted = yield* Deferred.make<void>()
        const handler = Handler.job(
          Hang,
          ({ n }) =>
            n === 1
              ? Deferred.succeed(inside, undefined).pipe(
                  Effect.andThen(Effect.never),
                  Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined))
                )
              : Effect.void,
          { policy: [Timeout("300 millis")] }
        )
        yield* Effect.gen(function* () {
          const p = yield* Publisher.Publisher
          const hung = yield* p.enqueue(Hang, { n: 1 })
          const [next] = yield* withWorker(
            Effect.gen(function* () {
              yield* Deferred.await(inside)
              const next = yield* p.enqueue(Hang, { n: 2 })
              // the second job finds the key held by the hanging one and waits ...
              yield* until(next, (d) => d.logs.some((l) => l.kind === "Requeued"))
              // ... until the timeout interrupts the first and its slot is released
              yield* until(next, (d) => d.job.state === "Succeeded")
              return [next] as const
            }),
            { concurrency: 2 }
          )
          expect(yield* Deferred.isDone(interrupted)).toBe(true)
          const h = yield* until(hung, () => true)
          expect(h.job.state).toBe("Failed")
          expect(h.logs.at(-1)!.message).toBe("Timed out after 300 ms (PerAttempt)")
          const n = yield* until(next, () => true)
          expect(n.logs.find((l) => l.kind === "Requeued")!.message).toBe(requeuedText("one-at-a-time", 1))
        }).pipe(Effect.provide(deploy({ handlers: [handler] })))
      }).pipe(Effect.provide(infra()))
    })

    it.live("a Total timeout's deadline is stamped at publish and bounds the job from its enqueue, across attempts", () => {
      const Bounded = Contract.job("Bounded", P, { policy: [Timeout("600 millis", { scope: "Total" }), Retry(10, { initialDelay: "150 millis", factor: 1 })] })
      let late = 0
      const handler = Handler.job(Bounded, ({ n }) =>
        n === 1 ? Effect.fail("still down") : n === 2 ? Effect.never : Effect.sync(() => late++)
      )
      return Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const t0 = Date.now()
        const retried = yield* p.enqueue(Bounded, { n: 1 })
        const hanging = yield* p.schedule(Bounded, { n: 2 }, new Date(t0 + 300))
        const tooLate = yield* p.schedule(Bounded, { n: 3 }, new Date(t0 + 900))
        const explicit = yield* p.enqueue(Bounded, { n: 4 }, JobParameters.make().withTimeout("5 seconds", "Total"))
        // at publish: the deadline exists (wall clock from enqueue), and nothing else is stored or stamped
        const published = yield* metadataOf(retried)
        expect(published.stampedAt).toBeUndefined()
        expect(Object.keys(published.policies)).toEqual(["timeout"])
        expect(published.policies.timeout!.source).toBe("contract")
        const deadline = Date.parse(published.policies.timeout!.value.deadline!)
        expect(deadline - t0).toBeGreaterThanOrEqual(600 - 5)
        expect(deadline - Date.now()).toBeLessThanOrEqual(600)
        const mine = (yield* metadataOf(explicit)).policies.timeout!
        expect(mine.source).toBe("enqueue")
        expect(Date.parse(mine.value.deadline!) - t0).toBeGreaterThanOrEqual(5000 - 5)

        yield* withWorker(
          Effect.forEach([retried, hanging, tooLate, explicit], (id) => until(id, (d) => d.job.state === "Failed" || d.job.state === "Succeeded")),
          { concurrency: 3 }
        )
        // retried every 150 ms, and not past the deadline: the attempt that would start after it is not scheduled
        const r = yield* until(retried, () => true)
        expect(r.job.state).toBe("Failed")
        expect(r.job.attempt).toBeGreaterThanOrEqual(2)
        expect(r.job.attempt).toBeLessThanOrEqual(5)
        expect(r.logs.at(-1)!.message).toMatch(/Not retried: the next attempt would start after the Total deadline/)
        // the hanging handler (first run 300 ms after enqueue) got what was left until the deadline, not 600 ms
        const h = yield* until(hanging, () => true)
        expect(h.job.state).toBe("Failed")
        const budget = Number(/^Timed out: Total deadline .* reached (\d+) ms into this attempt\n/.exec(h.logs.at(-1)!.message)?.[1])
        expect(budget).toBeGreaterThan(0)
        expect(budget).toBeLessThan(400)
        expect(h.logs.at(-1)!.message).toMatch(/\nNot retried: the next attempt would start after the Total deadline/)
        // a job first picked up after its deadline fails without running
        const t = yield* until(tooLate, () => true)
        expect(t.job.state).toBe("Failed")
        expect(t.logs.at(-1)!.message).toMatch(/^Timed out: Total deadline .* passed before this attempt ran/)
        expect(late).toBe(1) // only the job with its own 5-second deadline ran
        expect((yield* until(explicit, () => true)).job.state).toBe("Succeeded")
        // the stamp keeps the publish-time deadline
        expect((yield* metadataOf(retried)).policies.timeout).toEqual(published.policies.timeout)
      }).pipe(Effect.provide(deploy({ handlers: [handler] })), Effect.provide(infra()))
    })
  })
}
