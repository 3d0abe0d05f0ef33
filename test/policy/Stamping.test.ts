import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import {
  CircuitBreaker,
  Contract,
  Handler,
  JobParameters,
  Mutex,
  Publisher,
  RateLimit,
  Retry,
  Semaphore,
  Timeout
} from "warp-effect"
import { LOCK_PREFIX, requeuedText } from "../../src/internal/concurrency/ConcurrencyBehavior.js"
import { SemaphoreProvider } from "../../src/internal/semaphore/SemaphoreProvider.js"
import { JobStore } from "../../src/internal/store/JobStore.js"
import { backends, deploy, metadataOf, until, withWorker } from "./env.js"

const P = Schema.Struct({ n: Schema.Number })
const encoded = <A>(d: { readonly value: A }) => d.value

for (const [name, infra] of backends) {
  describe(`stamping on ${name}`, () => {
    it.live("publish stores only explicit metadata; the first attempt's finalizing write stamps every winner with its source", () =>
      Effect.gen(function* () {
        const Stamp = Contract.job("Stamp", P, {
          policy: [Mutex("contract-key"), Retry(4), RateLimit("contract-api", 100, "1 minute"), CircuitBreaker("contract-group", 5, "1 minute")]
        })
        const inside = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const handler = Handler.job(
          Stamp,
          ({ n }) => (n === 1 ? Deferred.succeed(inside, undefined).pipe(Effect.andThen(Deferred.await(release))) : Effect.void),
          { policy: [Semaphore("handler-key", 2), Timeout("5 seconds")] }
        )
        yield* Effect.gen(function* () {
          const p = yield* Publisher.Publisher
          const explicit = yield* p.enqueue(Stamp, { n: 1 }, JobParameters.make().withRateLimit("enqueue-api", 50, "1 minute"))
          const plain = yield* p.enqueue(Stamp, { n: 2 })
          // at publish there is no handler to ask: only what the caller passed is stored, nothing is stamped
          expect(Option.getOrThrow(yield* (yield* JobStore).get(explicit)).job.metadata).toEqual({
            policies: { rateLimit: { source: "enqueue", value: { key: "enqueue-api", limit: 50, windowMs: 60_000 } } }
          })
          expect((yield* metadataOf(plain)).policies).toEqual({})
          expect((yield* metadataOf(plain)).stampedAt).toBeUndefined()

          const before = new Date()
          yield* withWorker(
            Effect.gen(function* () {
              yield* Deferred.await(inside)
              // inside its handler the attempt has resolved its policy, but not written it down
              const running = yield* metadataOf(explicit)
              expect(running.stampedAt).toBeUndefined()
              expect(Object.keys(running.policies)).toEqual(["rateLimit"])
              yield* Deferred.succeed(release, undefined)
              yield* until(explicit, (d) => d.job.state === "Succeeded")
              yield* until(plain, (d) => d.job.state === "Succeeded")
            })
          )
          const after = new Date()
          for (const [id, rateLimit] of [
            [explicit, { source: "enqueue", value: encoded(RateLimit("enqueue-api", 50, "1 minute")) }],
            [plain, { source: "contract", value: encoded(RateLimit("contract-api", 100, "1 minute")) }]
          ] as const) {
            const m = yield* metadataOf(id)
            expect(m.policies).toEqual({
              concurrency: { source: "handler", value: encoded(Semaphore("handler-key", 2)) },
              timeout: { source: "handler", value: encoded(Timeout("5 seconds")) },
              retry: { source: "contract", value: encoded(Retry(4)) },
              rateLimit,
              circuitBreaker: { source: "contract", value: encoded(CircuitBreaker("contract-group", 5, "1 minute")) }
            })
            const stampedAt = Date.parse(m.stampedAt!)
            expect(stampedAt).toBeGreaterThanOrEqual(before.getTime() - 5)
            expect(stampedAt).toBeLessThanOrEqual(after.getTime() + 5)
          }
        }).pipe(Effect.provide(deploy({ handlers: [handler], globals: [Retry(9), Timeout("9 seconds")] })))
      }).pipe(Effect.provide(infra())))

    it.live("a retried job keeps its stamped retry policy across a redeploy that declares another", () =>
      Effect.gen(function* () {
        const v1 = Contract.job("Flaky", P, { policy: [Retry(3, { initialDelay: "800 millis", factor: 1 })] })
        const v1Handler = Handler.job(v1, () => Effect.fail("v1 says no"), { policy: [Mutex("v1-key", { mode: "Wait" })] })
        const id = yield* Effect.gen(function* () {
          const id = yield* (yield* Publisher.Publisher).enqueue(v1, { n: 1 })
          yield* withWorker(until(id, (d) => d.logs.some((l) => l.kind === "Requeued")))
          return id
        }).pipe(Effect.provide(deploy({ handlers: [v1Handler] })))
        const stamped = yield* metadataOf(id)
        expect(stamped.policies).toEqual({
          retry: { source: "contract", value: encoded(Retry(3, { initialDelay: "800 millis", factor: 1 })) },
          concurrency: { source: "handler", value: encoded(Mutex("v1-key", { mode: "Wait" })) }
        })

        // redeploy: same type name, the contract now allows one attempt and the handler another key
        const v2 = Contract.job("Flaky", P, { policy: [Retry(1), Mutex("v2-contract-key")] })
        const attempts: Array<number> = []
        const v2Handler = Handler.job(v2, (_, a) => Effect.sync(() => attempts.push(a.attempt)).pipe(Effect.andThen(Effect.fail("v2 says no"))), {
          policy: [Retry(1), Semaphore("v2-key", 4)]
        })
        yield* withWorker(until(id, (d) => d.job.state === "Failed")).pipe(
          Effect.provide(deploy({ handlers: [v2Handler], globals: [Retry(1)] }))
        )
        const d = yield* until(id, () => true)
        // the stamped Retry(3) governed: two more attempts under v2's body, then Failed
        expect(attempts).toEqual([2, 3])
        expect(d.job.attempt).toBe(3)
        expect(d.logs.filter((l) => l.kind === "Requeued").map((l) => l.message.split(" after")[0])).toEqual([
          "Retry 2/3 in 800ms",
          "Retry 3/3 in 800ms"
        ])
        expect(yield* metadataOf(id)).toEqual(stamped)
      }).pipe(Effect.provide(infra())))

    it.live("a Wait-mode requeued job keeps its stamped concurrency key across a redeploy", () =>
      Effect.gen(function* () {
        const provider = yield* SemaphoreProvider
        const v1 = Contract.job("Serial", P)
        const v1Handler = Handler.job(v1, () => Effect.void, { policy: [Mutex("held-key", { mode: "Wait" })] })
        const v2 = Contract.job("Serial", P, { policy: [Mutex("v2-contract-key", { mode: "Skip" })] })
        let v2Runs = 0
        const v2Handler = Handler.job(v2, () => Effect.sync(() => v2Runs++), { policy: [Semaphore("v2-key", 3, { mode: "Skip" })] })
        yield* Effect.scoped(
          Effect.gen(function* () {
            // someone else holds the stamped key for the whole first deploy and the start of the second
            const held = yield* provider.tryAcquire(LOCK_PREFIX + "held-key", 1, 0)
            expect(held._tag).toBe("Some")
            const id = yield* Effect.gen(function* () {
              const id = yield* (yield* Publisher.Publisher).enqueue(v1, { n: 1 })
              yield* withWorker(until(id, (d) => d.logs.some((l) => l.kind === "Requeued")))
              return id
            }).pipe(Effect.provide(deploy({ handlers: [v1Handler] })))
            const stamped = yield* metadataOf(id)
            expect(stamped.policies).toEqual({ concurrency: { source: "handler", value: encoded(Mutex("held-key", { mode: "Wait" })) } })
            const requeuedBefore = (yield* until(id, () => true)).logs.filter((l) => l.kind === "Requeued" && !l.message.startsWith("Claim released")).length

            yield* withWorker(
              Effect.gen(function* () {
                // still the stamped key and mode: requeued again (a re-resolved Semaphore('v2-key') Skip would run or drop it)
                // (a worker shutting down also requeues rows it claimed but had not started: "Claim released ...")
                const gateRequeues = (d: { readonly logs: ReadonlyArray<{ readonly kind: string; readonly message: string }> }) =>
                  d.logs.filter((l) => l.kind === "Requeued" && !l.message.startsWith("Claim released"))
                const d = yield* until(id, (d) => gateRequeues(d).length >= requeuedBefore + 2)
                for (const l of gateRequeues(d)) expect(l.message).toBe(requeuedText("held-key", 1))
                expect(v2Runs).toBe(0)
              })
            ).pipe(Effect.provide(deploy({ handlers: [v2Handler] })))
            return id
          })
        ).pipe(
          Effect.flatMap((id) =>
            // the slot is free now: the job runs under the new deploy's body, still governed by its stamp
            withWorker(until(id, (d) => d.job.state === "Succeeded")).pipe(
              Effect.provide(deploy({ handlers: [v2Handler] })),
              Effect.andThen(metadataOf(id)),
              Effect.map((m) => {
                expect(m.policies).toEqual({ concurrency: { source: "handler", value: encoded(Mutex("held-key", { mode: "Wait" })) } })
                expect(v2Runs).toBe(1)
              })
            )
          )
        )
      }).pipe(Effect.provide(infra())))

    it.live("global defaults are never stamped and are read live: a changed global applies to the next attempt", () =>
      Effect.gen(function* () {
        const G = Contract.job("Global", P)
        const handler = Handler.job(G, () => Effect.fail("always"))
        const id = yield* Effect.gen(function* () {
          const id = yield* (yield* Publisher.Publisher).enqueue(G, { n: 1 })
          yield* withWorker(until(id, (d) => d.logs.some((l) => l.kind === "Requeued")))
          return id
        }).pipe(Effect.provide(deploy({ handlers: [handler], globals: [Retry(2, { initialDelay: "800 millis" })] })))
        const first = yield* metadataOf(id)
        expect(first.stampedAt).toBeDefined()
        expect(first.policies).toEqual({})
        expect((yield* until(id, () => true)).logs.find((l) => l.kind === "Requeued")!.message).toMatch(/^Retry 2\/2 in 800ms after: .*always/)

        // the operator raises the global default; the row carries no retry entry, so the new one applies
        yield* withWorker(until(id, (d) => d.job.state === "Failed")).pipe(
          Effect.provide(deploy({ handlers: [handler], globals: [Retry(4, { initialDelay: "1 millis" })] }))
        )
        const d = yield* until(id, () => true)
        expect(d.job.attempt).toBe(4)
        expect(d.logs.filter((l) => l.kind === "Requeued").map((l) => l.message.slice(0, 9))).toEqual(["Retry 2/2", "Retry 3/4", "Retry 4/4"])
        expect(yield* metadataOf(id)).toEqual(first)
      }).pipe(Effect.provide(infra())))
  })
}
