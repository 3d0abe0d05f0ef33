import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Contract, Handler, Mutex, Publisher, Retry, Semaphore } from "warp-effect"
import { HolderCounter } from "../support/holders.js"
import { backends, deploy, meeting, metadataOf, pair, until, withWorker } from "./env.js"

const P = Schema.Struct({ n: Schema.Number })
const encoded = <A>(d: { readonly value: A }) => d.value

for (const [name, infra] of backends) {
  describe(`message and handler declarations on ${name}`, () => {
    it.live("children that declare nothing contend on the contract's key; a handler's own policy governs its child only", () => {
      const Evt = Contract.message("Evt", P, { policy: [Mutex("evt", { mode: "Wait" })] })
      const holders = new HolderCounter()
      // the first 'own' child and the first contract-key child wait (bounded) to be running together
      const together = pair()
      const body = (key: string, meet: Effect.Effect<void>) => () => holders.hold("all", holders.hold(key, Effect.andThen(meet, Effect.sleep("15 millis"))))
      const handlers = [
        Handler.message(Evt, "a", body("evt", together.left)),
        Handler.message(Evt, "b", body("evt", together.left)),
        Handler.message(Evt, "c", body("evt", together.left)),
        Handler.message(Evt, "own", body("own", together.right), { policy: [Semaphore("own", 2)] })
      ]
      return Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const children = (yield* Effect.forEach([1, 2, 3, 4], (n) => p.publish(Evt, { n }))).flat()
        expect(children.length).toBe(16)
        yield* withWorker(Effect.forEach(children, (id) => until(id, (d) => d.job.state === "Succeeded")), { concurrency: 6 })
        // every undeclared child held the one contract key: never two at once, across handlers a, b, c
        expect(holders.max.get("evt")).toBe(1)
        expect(holders.max.get("own")).toBeLessThanOrEqual(2)
        // ... while the worker did run children side by side (the 'own' children are not under 'evt')
        expect(holders.max.get("all")).toBeGreaterThan(1)
        for (const id of children) {
          const d = yield* until(id, () => true)
          expect((yield* metadataOf(id)).policies.concurrency).toEqual(
            d.job.handler === "own"
              ? { source: "handler", value: encoded(Semaphore("own", 2)) }
              : { source: "contract", value: encoded(Mutex("evt", { mode: "Wait" })) }
          )
        }
      }).pipe(Effect.provide(deploy({ handlers })), Effect.provide(infra()))
    })
  })
}

describe("handler declarations", () => {
  const [, memory] = backends[0]!

  it.live("a handler's declaration covers every job it runs; a derived handler inherits none of it", () => {
    const Base = Contract.job("Base", P)
    const Other = Contract.job("Other", P)
    const holders = new HolderCounter()
    // jobs 1 and 2 of a handler wait (bounded) to be running together; a serialized handler cannot, and shows 1
    const meetings = new Map<string, ReturnType<typeof meeting>>()
    const meet = (key: string, n: number) => {
      if (n > 2) return Effect.void
      if (!meetings.has(key)) meetings.set(key, meeting(2, key === "base" ? "100 millis" : "5 seconds"))
      return meetings.get(key)!.arrive
    }
    const body = (key: string) => ({ n }: { n: number }) =>
      holders.hold(key, Effect.andThen(meet(key, n), Effect.sleep("15 millis"))).pipe(Effect.andThen(n < 0 ? Effect.fail("negative") : Effect.void))
    const base = Handler.job(Base, body("base"), { policy: [Mutex("base-key", { mode: "Wait" }), Retry(3, { initialDelay: "1 millis" })] })
    // same contract, new body: built from `base`, declaring nothing
    const derivedPlain = Handler.derive(base, body("derived"))
    // a derived handler for another deploy, declaring its own
    const derivedOwn = Handler.derive(Handler.job(Other, body("x"), { policy: [Retry(5)] }), body("other"), { policy: [Semaphore("other-key", 2)] })
    expect(base.policies.concurrency?.key).toBe("base-key")
    expect(derivedPlain.policies).toEqual({})
    expect(derivedOwn.policies).toEqual({ concurrency: Semaphore("other-key", 2).value })

    const run = (handlers: ReadonlyArray<Handler.AnyHandler>, contract: Contract.JobContract<string, { readonly n: number }>, ns: ReadonlyArray<number>) =>
      Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const ids = yield* Effect.forEach(ns, (n) => p.enqueue(contract, { n }))
        yield* withWorker(Effect.forEach(ids, (id) => until(id, (d) => d.job.state === "Succeeded" || d.job.state === "Failed")), { concurrency: 4 })
        return ids
      }).pipe(Effect.provide(deploy({ handlers })))

    return Effect.gen(function* () {
      // the base handler: its Mutex serializes every job of its type, its Retry retries them
      yield* run([base], Base, [1, 2, 3, 4])
      expect(holders.max.get("base")).toBe(1)
      // (alone: Wait-mode requeues count as attempts, see the report)
      const [failing] = yield* run([base], Base, [-1])
      const failedBase = yield* until(failing!, () => true)
      expect(failedBase.job.attempt).toBe(3)
      // the derived handler replaces it for the same type: no mutex, no retry
      const d = yield* run([derivedPlain], Base, [1, 2, 3, 4, -1])
      expect(holders.max.get("derived")).toBeGreaterThan(1)
      const failedDerived = yield* until(d[4]!, () => true)
      expect(failedDerived.job.state).toBe("Failed")
      expect(failedDerived.job.attempt).toBe(1)
      expect((yield* metadataOf(d[0]!)).policies).toEqual({})
      // a derived handler with its own declaration: exactly that, nothing of the handler it came from
      const o = yield* run([derivedOwn], Other, [1, 2, 3, 4])
      expect(holders.max.get("other")).toBeLessThanOrEqual(2)
      expect((yield* metadataOf(o[0]!)).policies).toEqual({ concurrency: { source: "handler", value: encoded(Semaphore("other-key", 2)) } })
      const [otherFailing] = yield* run([derivedOwn], Other, [-1])
      expect((yield* until(otherFailing!, () => true)).job.state).toBe("Failed")
      expect((yield* until(otherFailing!, () => true)).job.attempt).toBe(1)
    }).pipe(Effect.provide(memory()))
  })
})
