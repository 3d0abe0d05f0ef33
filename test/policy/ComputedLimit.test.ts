/**
 * Concurrency limits computed from the payload (issue 17, item 3b): `Semaphore(key, (payload) => n)`
 * on a contract or a handler is computed once by the attempt that stamps, and the number is stamped
 * (later attempts and the claim read a plain number); an invalid result fails the job with a clear
 * message; `Fifo` with a computed limit is refused at declaration.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as fc from "fast-check"
import { Contract, Handler, Publisher, Semaphore } from "warp-effect"
import { JobMetadata } from "../../src/internal/policy/JobMetadata.js"
import * as PolicyResolution from "../../src/internal/attempt/PolicyResolution.js"
import { requeuedText } from "../../src/internal/concurrency/ConcurrencyBehavior.js"
import { HolderCounter } from "../support/holders.js"
import { detail } from "../support/runtime.js"
import { backends, deploy, metadataOf, until, withWorker } from "./env.js"

const Tiered = Schema.Struct({ n: Schema.Number, tag: Schema.String })
const limitOf = (p: { readonly n: number }) => p.n

const resolveFor = (contract: any, handler: any, payload: unknown) =>
  PolicyResolution.resolve({ stored: JobMetadata.empty, handler, contract, globals: {}, now: new Date(0), payload })

describe("computed concurrency limits: resolution", () => {
  it("property: the stamped limit equals the function's value for arbitrary payloads (contract and handler rungs)", () => {
    const OnContract = Contract.job("OnContract", Tiered, { policy: [Semaphore("tiered", limitOf)] })
    const plain = Handler.job(OnContract, () => Effect.void)
    const OnHandler = Contract.job("OnHandler", Tiered, { policy: [Semaphore("contract-key", 3)] })
    const own = Handler.job(OnHandler, () => Effect.void, { policy: [Semaphore("handler-key", (p: { n: number; tag: string }) => p.n + p.tag.length)] })
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1_000_000 }), fc.string({ maxLength: 20 }), (n, tag) => {
        const a = resolveFor(OnContract, plain, { n, tag })
        expect(a.failure).toBeUndefined()
        expect(a.metadata.policies.concurrency).toEqual({ source: "contract", value: { key: "tiered", limit: n, mode: "Wait" } })
        expect(a.effective.concurrency?.limit).toBe(n)
        const b = resolveFor(OnHandler, own, { n, tag })
        expect(b.metadata.policies.concurrency).toEqual({ source: "handler", value: { key: "handler-key", limit: n + tag.length, mode: "Wait" } })
      })
    )
  })

  it("an invalid result (NaN, 0, negative, 1.5, too large, a string, a throw) is a failure naming the key and the value", () => {
    const results: ReadonlyArray<readonly [unknown, string]> = [
      [Number.NaN, "got NaN"],
      [0, "got 0"],
      [-2, "got -2"],
      [1.5, "got 1.5"],
      [2 ** 31, "got 2147483648"],
      ["3", `got "3"`],
      [undefined, "got undefined"]
    ]
    for (const [value, got] of results) {
      const C = Contract.job("Bad", Tiered, { policy: [Semaphore("bad-key", () => value as number)] })
      const r = resolveFor(C, Handler.job(C, () => Effect.void), { n: 1, tag: "" })
      expect(r.failure).toContain("Semaphore('bad-key', <computed>): the computed limit must be an integer >= 1")
      expect(r.failure).toContain(got)
    }
    const Throws = Contract.job("Throws", Tiered, {
      policy: [
        Semaphore("boom", () => {
          throw new Error("no tier")
        })
      ]
    })
    expect(resolveFor(Throws, Handler.job(Throws, () => Effect.void), { n: 1, tag: "" }).failure).toBe(
      "Semaphore('boom', <computed>): computing the limit from the payload threw: no tier"
    )
  })

  it("a stamped row is not recomputed", () => {
    let calls = 0
    const C = Contract.job("Once", Tiered, { policy: [Semaphore("once", (p: { n: number }) => (calls++, p.n))] })
    const h = Handler.job(C, () => Effect.void)
    const first = resolveFor(C, h, { n: 4, tag: "" })
    const again = PolicyResolution.resolve({ stored: first.metadata, handler: h, contract: C, globals: {}, now: new Date(1), payload: { n: 9, tag: "" } })
    expect(again.effective.concurrency?.limit).toBe(4)
    expect(calls).toBe(1)
  })

  it("a computed limit with mode Fifo is refused at declaration", () => {
    expect(() => Semaphore("fifo", () => 2, { mode: "Fifo" })).toThrow(/computed limit cannot be used with mode 'Fifo'/)
  })
})

for (const [name, infra] of backends) {
  describe(`computed concurrency limits through a worker on ${name}`, () => {
    it.live("the computed number is stamped and admits that many; an invalid one fails the job with the message", () =>
      Effect.gen(function* () {
        const C = Contract.job("ComputedWork", Tiered, { policy: [Semaphore("computed", limitOf)] })
        const holders = new HolderCounter()
        const release = yield* Deferred.make<void>()
        const handler = Handler.job(C, ({ tag }) => (tag === "hold" ? holders.hold("computed", Deferred.await(release)) : Effect.void))
        yield* Effect.gen(function* () {
          const p = yield* Publisher.Publisher
          const held = yield* Effect.forEach([1, 2, 3, 4, 5], () => p.enqueue(C, { n: 3, tag: "hold" }))
          const zero = yield* p.enqueue(C, { n: 0, tag: "x" })
          const frac = yield* p.enqueue(C, { n: 2.5, tag: "x" })
          yield* withWorker(
            Effect.gen(function* () {
              const failedZero = yield* until(zero, (d) => d.job.state === "Failed")
              const failedFrac = yield* until(frac, (d) => d.job.state === "Failed")
              expect(failedZero.logs.at(-1)?.message).toContain("Semaphore('computed', <computed>): the computed limit must be an integer >= 1 and at most 2147483647, got 0")
              expect(failedFrac.logs.at(-1)?.message).toContain("got 2.5")
              // three hold the key at once, and a surplus one was requeued naming the computed 3
              const start = Date.now()
              while (true) {
                const texts = yield* Effect.forEach(held, (id) => Effect.map(detail(id), (d) => d.logs.map((l) => l.message)))
                if (holders.current("computed") === 3 && texts.flat().includes(requeuedText("computed", 3))) break
                if (Date.now() - start > 20_000) return yield* Effect.die(new Error(`never 3 holders and a requeue at 3; saw ${holders.current("computed")}`))
                yield* Effect.sleep("10 millis")
              }
              yield* Deferred.succeed(release, undefined)
              for (const id of held) yield* until(id, (d) => d.job.state === "Succeeded")
            }),
            { concurrency: 8 }
          )
          expect(holders.max.get("computed")).toBe(3)
          expect((yield* metadataOf(held[0]!)).policies.concurrency).toEqual({ source: "contract", value: { key: "computed", limit: 3, mode: "Wait" } })
        }).pipe(Effect.provide(deploy({ handlers: [handler] })))
      }).pipe(Effect.provide(infra())))
  })
}
