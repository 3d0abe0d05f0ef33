import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import { Contract, Handler, Publisher, Registry, Worker } from "warp-effect"
import { JobStore } from "../src/internal/store/JobStore.js"
import { detail, drained } from "./support/runtime.js"
import { stores } from "./support/stores.js"

const Add = Contract.job("Add", Schema.Struct({ n: Schema.Number }))
const Boom = Contract.job("Boom", Schema.Struct({ mode: Schema.String }))
const Signup = Contract.message("Signup", Schema.Struct({ user: Schema.String }))

class Sum extends Context.Service<Sum, Ref.Ref<number>>()("test/Sum") {}

const handlers = [
  Handler.job(Add, ({ n }) => Effect.flatMap(Sum, (r) => Ref.update(r, (x) => x + n))),
  Handler.job(Boom, ({ mode }) => (mode === "fail" ? Effect.fail("handler said no") : Effect.die(new Error("kaboom")))),
  Handler.message(Signup, "welcome-mail", () => Effect.void),
  Handler.message(Signup, "crm-sync", () => Effect.void)
] as const

for (const [name, storeLayer] of stores) {
  const env = () =>
    Publisher.layer.pipe(
      Layer.provideMerge(Registry.layer({ handlers })),
      Layer.provideMerge(Layer.effect(Sum, Ref.make(0))),
      Layer.provideMerge(storeLayer())
    )

  describe(`Worker on ${name}`, () => {
    it.live("runs every job exactly once with several fibers; failures and defects become Failed", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const ids = yield* Effect.forEach(Array.from({ length: 50 }, (_, i) => i + 1), (n) => publisher.enqueue(Add, { n }))
        const fail = yield* publisher.enqueue(Boom, { mode: "fail" })
        const die = yield* publisher.enqueue(Boom, { mode: "die" })
        yield* Effect.scoped(Effect.andThen(Worker.make({ concurrency: 6, pollInterval: "10 millis" }), drained()))
        expect(yield* Ref.get(yield* Sum)).toBe((50 * 51) / 2)
        for (const id of ids) expect((yield* detail(id)).job.state).toBe("Succeeded")
        const f = yield* detail(fail)
        expect(f.job.state).toBe("Failed")
        expect(f.logs.at(-1)!.message).toContain("handler said no")
        const d = yield* detail(die)
        expect(d.job.state).toBe("Failed")
        expect(d.logs.at(-1)!.message).toContain("kaboom")
        const counters = yield* (yield* JobStore).counters
        expect(counters.get("stats:succeeded")).toBe(50)
        expect(counters.get("stats:failed")).toBe(2)
      }).pipe(Effect.provide(env())))

    it.live("schedule: a job scheduled in the future is Scheduled and not run before it is due", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const later = yield* publisher.schedule(Add, { n: 1 }, new Date(Date.now() + 3_600_000))
        const soon = yield* publisher.schedule(Add, { n: 2 }, new Date(Date.now() + 150))
        expect((yield* detail(later)).job.state).toBe("Scheduled")
        yield* Effect.scoped(
          Effect.gen(function* () {
            yield* Worker.make({ concurrency: 2, pollInterval: "10 millis" })
            while ((yield* detail(soon)).job.state !== "Succeeded") yield* Effect.sleep("10 millis")
          })
        )
        expect((yield* detail(later)).job.state).toBe("Scheduled")
        expect(yield* Ref.get(yield* Sum)).toBe(2)
      }).pipe(Effect.provide(env())))

    it.live("a message is routed to every registered handler as one child job each", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const children = yield* publisher.publish(Signup, { user: "ada" })
        expect(children.length).toBe(2)
        yield* Effect.scoped(Effect.andThen(Worker.make({ concurrency: 2, pollInterval: "10 millis" }), drained()))
        const handlersSeen = yield* Effect.forEach(children, (id) => Effect.map(detail(id), (d) => [d.job.handler, d.job.state]))
        expect(handlersSeen.sort()).toEqual([["crm-sync", "Succeeded"], ["welcome-mail", "Succeeded"]])
      }).pipe(Effect.provide(env())))

    it.live("bad input: payload failing its schema is rejected at enqueue with a typed error and nothing inserted", () =>
      Effect.gen(function* () {
        const publisher = yield* Publisher.Publisher
        const err = yield* Effect.flip(publisher.enqueue(Add, { n: "x" } as any))
        expect(err._tag).toBe("InvalidPayload")
        const counts = yield* (yield* JobStore).countByState
        expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBe(0)
      }).pipe(Effect.provide(env())))

    it.live("bad input at fetch: unknown type and bad payload fail the job, the worker keeps running", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const now = new Date(Date.now() - 10)
        yield* store.insert([
          { id: "unknown-1", type: "NoSuchJob", handler: null, payload: {}, state: "Enqueued", scheduleTime: now, metadata: { policies: {} } },
          { id: "badpayload-1", type: "Add", handler: null, payload: { n: "nope" }, state: "Enqueued", scheduleTime: now, metadata: { policies: {} } }
        ])
        const publisher = yield* Publisher.Publisher
        const ok = yield* publisher.enqueue(Add, { n: 5 })
        yield* Effect.scoped(Effect.andThen(Worker.make({ concurrency: 1, pollInterval: "10 millis" }), drained()))
        const u = yield* detail("unknown-1")
        expect(u.job.state).toBe("Failed")
        expect(u.logs.at(-1)!.message).toMatch(/Unknown job type 'NoSuchJob'/)
        const b = yield* detail("badpayload-1")
        expect(b.job.state).toBe("Failed")
        expect(b.logs.at(-1)!.message).toMatch(/Payload does not match the schema of 'Add'/)
        expect((yield* detail(ok)).job.state).toBe("Succeeded")
      }).pipe(Effect.provide(env())))

    it.live("closing the worker scope waits for a running attempt within the grace period", () =>
      Effect.gen(function* () {
        const started = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const Slow = Contract.job("Slow", Schema.Struct({}))
        const reg = Registry.layer({ handlers: [Handler.job(Slow, () => Deferred.succeed(started, undefined).pipe(Effect.andThen(Deferred.await(release))))] })
        const id = yield* Effect.gen(function* () {
          const id = yield* (yield* Publisher.Publisher).enqueue(Slow, {})
          yield* Effect.scoped(
            Effect.gen(function* () {
              yield* Worker.make({ concurrency: 1, pollInterval: "10 millis", gracePeriod: "10 seconds" })
              yield* Deferred.await(started)
              // let the attempt finish while the scope is closing
              yield* Effect.forkDetach(Effect.sleep("50 millis").pipe(Effect.andThen(Deferred.succeed(release, undefined))))
            })
          )
          return id
        }).pipe(Effect.provide(Publisher.layer.pipe(Layer.provideMerge(reg))))
        expect((yield* detail(id)).job.state).toBe("Succeeded")
      }).pipe(Effect.provide(storeLayer())))

    it.live("an attempt still running after the grace period is interrupted and requeued, not lost", () =>
      Effect.gen(function* () {
        const started = yield* Deferred.make<void>()
        const Hang = Contract.job("Hang", Schema.Struct({}))
        const reg = Registry.layer({ handlers: [Handler.job(Hang, () => Deferred.succeed(started, undefined).pipe(Effect.andThen(Effect.never)))] })
        const id = yield* Effect.gen(function* () {
          const id = yield* (yield* Publisher.Publisher).enqueue(Hang, {})
          yield* Effect.scoped(
            Effect.andThen(Worker.make({ concurrency: 1, pollInterval: "10 millis", gracePeriod: "50 millis" }), Deferred.await(started))
          )
          return id
        }).pipe(Effect.provide(Publisher.layer.pipe(Layer.provideMerge(reg))))
        const d = yield* detail(id)
        expect(d.job.state).toBe("Enqueued")
        expect(d.logs.at(-1)).toMatchObject({ kind: "Requeued" })
        expect(d.logs.at(-1)!.message).toMatch(/interrupted/)
      }).pipe(Effect.provide(storeLayer())))
  })
}
