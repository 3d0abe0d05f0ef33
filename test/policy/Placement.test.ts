import { describe, expect, expectTypeOf, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { Contract, Handler, Mutex, Publisher, Retry, Timeout } from "warp-effect"
import type * as Declaration from "../../src/internal/policy/Declaration.js"
import { JobStore } from "../../src/internal/store/JobStore.js"
import { backends, deploy, until, withWorker } from "./env.js"

const P = Schema.Struct({ n: Schema.Number })
const Job = Contract.job("PJob", P)
const Msg = Contract.message("PMsg", P)
const Req = Contract.request("PReq", P)

describe("rejected placements at compile time", () => {
  it("stream and request handlers take no policy; a Total timeout is not a handler declaration", () => {
    // never called: the lines exist for the type checker (`npm run typecheck` fails if a restriction is lifted)
    const _rejected = () => [
      // @ts-expect-error — stream handlers have no options, so no policy
      Handler.stream(Job, () => Stream.make(1), { policy: [Mutex("k")] }),
      // @ts-expect-error — in-memory request handlers have no options, so no policy
      Handler.request(Req, () => Effect.succeed(1), { policy: [Mutex("k")] }),
      // @ts-expect-error — Timeout(scope: Total) runs from enqueue: never on a job handler
      Handler.job(Job, () => Effect.void, { policy: [Timeout("1 second", { scope: "Total" })] }),
      // @ts-expect-error — nor on a message handler
      Handler.message(Msg, "h", () => Effect.void, { policy: [Retry(2), Timeout("1 second", { scope: "Total" })] }),
      // @ts-expect-error — nor on a derived handler
      Handler.derive(Handler.job(Job, () => Effect.void), () => Effect.void, { policy: [Timeout("1 second", { scope: "Total" })] })
    ]
    void _rejected
    expectTypeOf<Parameters<typeof Handler.stream>["length"]>().toEqualTypeOf<2>()
    expectTypeOf<Parameters<typeof Handler.request>["length"]>().toEqualTypeOf<2>()
    expectTypeOf<Handler.StreamHandler>().not.toHaveProperty("policies")
    expectTypeOf<Handler.RequestHandler>().not.toHaveProperty("policies")
    expectTypeOf(Timeout("1 second", { scope: "Total" })).not.toMatchTypeOf<Declaration.HandlerDeclaration>()
    expectTypeOf(Timeout("1 second")).toMatchTypeOf<Declaration.HandlerDeclaration>()
    expectTypeOf(Timeout("1 second", { scope: "PerAttempt" })).toMatchTypeOf<Declaration.HandlerDeclaration>()
    // where a Total timeout belongs: the contract (and enqueue, see JobParameters.withTimeout)
    expect(Contract.job("Ok", P, { policy: [Timeout("1 second", { scope: "Total" })] }).policies.timeout?.scope).toBe("Total")
  })
})

describe("handlers built around the typed API are checked when their job runs", () => {
  it.live("each misplaced policy fails its own job with an audit entry; the worker and the other jobs carry on", () => {
    const S1 = Contract.job("StreamWithPolicies", P)
    const S2 = Contract.job("StreamWithPolicyOption", P)
    const S3 = Contract.job("PlainStream", P)
    const J1 = Contract.job("TotalOnHandler", P)
    const J2 = Contract.job("MalformedOnHandler", P)
    const J3 = Contract.job("Fine", P)
    const M = Contract.message("Routed", P)
    let ran = 0
    const run = () => Effect.sync(() => void ran++)
    const handlers = [
      { _tag: "StreamHandler", contract: S1, name: S1.name, run: () => Stream.fromEffect(run()), policies: { concurrency: Mutex("k").value } },
      { _tag: "StreamHandler", contract: S2, name: S2.name, run: () => Stream.fromEffect(run()), policy: [Mutex("k")] },
      Handler.stream(S3, () => Stream.fromEffect(run())),
      Handler.job(J1, run, { policy: [Timeout("1 second", { scope: "Total" }) as unknown as Declaration.HandlerDeclaration] }),
      { _tag: "JobHandler", contract: J2, name: J2.name, run, policies: { concurrency: { key: "", limit: 0, mode: "Wait" } } },
      Handler.job(J3, run),
      Handler.message(M, "fine-child", run),
      { _tag: "MessageHandler", contract: M, name: "total-child", run, policies: { timeout: Timeout("1 second", { scope: "Total" }).value } }
    ] as unknown as ReadonlyArray<Handler.AnyHandler>
    return Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      const ids = {
        s1: yield* p.enqueue(S1, { n: 1 }),
        s2: yield* p.enqueue(S2, { n: 1 }),
        s3: yield* p.enqueue(S3, { n: 1 }),
        j1: yield* p.enqueue(J1, { n: 1 }),
        j2: yield* p.enqueue(J2, { n: 1 })
      }
      const children = yield* p.publish(M, { n: 1 })
      const fine = yield* p.enqueue(J3, { n: 1 })
      const all = [...Object.values(ids), ...children, fine]
      yield* withWorker(Effect.forEach(all, (id) => until(id, (d) => d.job.state === "Failed" || d.job.state === "Succeeded")), { concurrency: 1 })
      const last = (id: string) => Effect.map(until(id, () => true), (d) => ({ state: d.job.state, message: d.logs.at(-1)!.message }))
      expect(yield* last(ids.s1)).toEqual({
        state: "Failed",
        message: "Policy declared on stream handler 'StreamWithPolicies': stream handlers cannot honour policy"
      })
      expect(yield* last(ids.s2)).toMatchObject({ state: "Failed", message: expect.stringMatching(/^Policy declared on stream handler 'StreamWithPolicyOption'/) })
      expect(yield* last(ids.j1)).toEqual({
        state: "Failed",
        message:
          "Timeout(scope: Total) declared on handler 'TotalOnHandler': its deadline runs from enqueue, so it must be declared on the contract or passed at enqueue"
      })
      expect(yield* last(ids.j2)).toMatchObject({ state: "Failed", message: expect.stringMatching(/^Invalid policy on handler 'MalformedOnHandler'/) })
      const byHandler = Object.fromEntries(
        yield* Effect.forEach(children, (id) => Effect.map(until(id, () => true), (d) => [d.job.handler, [d.job.state, d.logs.at(-1)!.message]]))
      )
      expect(byHandler["fine-child"]).toEqual(["Succeeded", "Succeeded"])
      expect(byHandler["total-child"][0]).toBe("Failed")
      expect(byHandler["total-child"][1]).toMatch(/^Timeout\(scope: Total\) declared on handler 'total-child'/)
      // the policy-free stream, the fine job and the fine child ran; nothing misplaced ever did
      expect(yield* last(ids.s3)).toEqual({ state: "Succeeded", message: "Succeeded" })
      expect(yield* last(fine)).toEqual({ state: "Succeeded", message: "Succeeded" })
      expect(ran).toBe(3)
      const counts = yield* (yield* JobStore).countByState
      expect(counts.Failed).toBe(5)
    }).pipe(Effect.provide(deploy({ handlers })), Effect.provide(Layer.fresh(backends[0]![1]())))
  })
})
