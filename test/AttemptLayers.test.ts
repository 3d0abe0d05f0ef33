/**
 * The attempt's layers (JobContext → ResolvedPolicy → Stamp), which the worker builds for every attempt
 * (`RunAttempt`), give the services the functions they wrap (`ResolvedPolicy.resolve`, `Stamp.of`) give:
 * the handler, payload, policies in force (globals read live, never stamped) and the stamp written.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import { Contract, GlobalPolicies, Handler, JobStore, JobStoreMemory, Mutex, Publisher, Registry, Retry, Timeout } from "warp-effect"
import * as JobContext from "../src/internal/attempt/JobContext.js"
import * as ResolvedPolicy from "../src/internal/attempt/ResolvedPolicy.js"
import * as Stamp from "../src/internal/attempt/Stamp.js"

const Mail = Contract.job("LayersMail", Schema.Struct({ to: Schema.String }), { policy: [Mutex("mail", { mode: "Wait" })] })
const handler = Handler.job(Mail, () => Effect.void, { policy: [Retry(4)] })

describe("attempt layers", () => {
  it.effect("the layers and the worker's direct build give the same policy, payload and stamp", () =>
    Effect.gen(function* () {
      const publisher = yield* Publisher.Publisher
      const store = yield* JobStore.JobStore
      const registry = yield* Registry.Registry
      yield* publisher.enqueue(Mail, { to: "a@example.com" })
      const [job] = yield* store.fetch("w1", 1, Duration.seconds(30))
      const context: JobContext.JobContextValue = { job: job!, workerId: "w1", startedAt: new Date("2026-12-06T00:00:00Z") }

      const viaLayers = yield* Effect.all([ResolvedPolicy.ResolvedPolicy, Stamp.Stamp]).pipe(
        Effect.provide(Stamp.layer.pipe(Layer.provideMerge(ResolvedPolicy.layer()), Layer.provideMerge(JobContext.layer(context))))
      )
      const globals = yield* (yield* GlobalPolicies.GlobalPolicies).current
      const direct = Result.getOrThrow(ResolvedPolicy.resolve(context, registry, globals))

      expect(viaLayers[0].payload).toEqual({ to: "a@example.com" })
      expect(direct.payload).toEqual(viaLayers[0].payload)
      expect(direct.policies).toEqual(viaLayers[0].policies)
      // enqueue-less: the handler's Retry and the contract's Mutex win their rungs; the global Timeout applies, unstamped
      expect(direct.policies.retry?.maxAttempts).toBe(4)
      expect(direct.policies.concurrency?.key).toBe("mail")
      expect(direct.policies.timeout).toBeDefined()
      expect(Stamp.of(direct)).toEqual(viaLayers[1])
      const stamped = viaLayers[1].metadata as { policies: Record<string, unknown>; stampedAt: string }
      expect(Object.keys(stamped.policies).sort()).toEqual(["concurrency", "retry"])
      expect(stamped.stampedAt).toBe("2026-12-06T00:00:00.000Z")
    }).pipe(
      Effect.provide(
        Publisher.layer.pipe(
          Layer.provideMerge(Registry.layer({ handlers: [handler] })),
          Layer.provideMerge(JobStoreMemory.layer),
          Layer.provideMerge(GlobalPolicies.layer([Timeout("1 minute")]))
        )
      )
    ))
})
