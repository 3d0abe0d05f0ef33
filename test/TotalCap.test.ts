/**
 * Total caps over a group of keys (`total: { group, limit }`): a job runs only when its key and its
 * group both have room. Counted live at every instant, per key and per group, on memory and PostgreSQL.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Concurrency, Contract, Handler, JobParameters, Policy, Publisher, Semaphore, Worker } from "warp-effect"
import { groupCancelledText, groupRequeuedText } from "../src/internal/concurrency/ConcurrencyBehavior.js"
import type { JobStore } from "../src/internal/store/JobStore.js"
import { HolderCounter } from "./support/holders.js"
import { detail, drained, stateOf, until } from "./support/runtime.js"
import { workerEnvs } from "./support/env.js"

const Export = Contract.job("Export", Schema.Struct({ tenant: Schema.String, i: Schema.Number }))
const exportsCap = { group: "exports", limit: 3 } as const

const setups = workerEnvs

for (const [name, env] of setups) {
  describe(`Total caps on ${name}`, () => {
    it.live("Wait: never more than 2 of a tenant nor 3 of the group inside, every job succeeds once", () => {
      const holders = new HolderCounter()
      const runs = new Map<string, number>()
      const handler = Handler.job(
        Export,
        ({ i, tenant }) =>
          holders.hold(
            "group:exports",
            holders.hold(
              tenant,
              // stays inside until the group is full (at most 300 ms: the last jobs cannot fill it), so that
              // the cap is reached however loaded the machine is
              Effect.andThen(
                Effect.sleep("5 millis").pipe(Effect.repeat({ until: () => holders.current("group:exports") >= 3 }), Effect.timeout("300 millis"), Effect.ignore),
                Effect.sync(() => runs.set(`${tenant}/${i}`, (runs.get(`${tenant}/${i}`) ?? 0) + 1))
              )
            )
          ),
        { policy: [Semaphore("unused", 1)] }
      )
      return Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const tenants = ["t1", "t2", "t3", "t4", "t5"]
        const ids: Array<string> = []
        for (let i = 0; i < 6; i++) {
          for (const tenant of tenants) {
            // the enqueue-time declaration wins over the handler's
            ids.push(yield* p.enqueue(Export, { tenant, i }, JobParameters.make().withSemaphore(tenant, 2, "Wait", exportsCap)))
          }
        }
        yield* Effect.scoped(Effect.andThen(Worker.make({ addons: [Concurrency.addon], concurrency: 10, pollInterval: "5 millis" }), drained(60_000)))
        for (const tenant of tenants) expect(holders.max.get(tenant), tenant).toBeLessThanOrEqual(2)
        // the group's cap held, and it was reached (10 fibers, 5 tenants of 2: the group is what limits)
        expect(holders.max.get("group:exports")).toBe(3)
        expect([...runs.values()].every((n) => n === 1) && runs.size === 30).toBe(true)
        const details = yield* Effect.forEach(ids, detail)
        expect(details.every((d) => d.job.state === "Succeeded")).toBe(true)
        // the claim leaves the rows of a full group to wait (docs/claim-admission.md): the group's requeue
        // text is left for two claims racing for its last slot, which the slots still settle
        expect(groupRequeuedText("exports", 3)).toBe("Requeued — group 'exports' full (3 slots)")
        // the total cap is stamped with the rest of the policy
        expect((details[0]!.job.metadata as any).policies.concurrency.value.total).toEqual(exportsCap)
      }).pipe(Effect.provide(env([handler])))
    })

    /**
     * Four tenants of one job each in a group of 2 (`params`), on 4 lanes: the two admitted handlers stay
     * inside until `whileFull` (what the test waits to see while the group is full) is done, so the group
     * is full when the other two are picked up however slowly the lanes claim. Returns the jobs' ids.
     */
    const fourInPair = (params: (tenant: string) => ReturnType<typeof JobParameters.make>, whileFull: (ids: ReadonlyArray<string>) => Effect.Effect<void, unknown, JobStore>) =>
      Effect.gen(function* () {
        const release = yield* Deferred.make<void>()
        const handler = Handler.job(Export, () => Deferred.await(release))
        return yield* Effect.gen(function* () {
          const p = yield* Publisher.Publisher
          const ids = yield* Effect.forEach(["a", "b", "c", "d"], (tenant, i) => p.enqueue(Export, { tenant, i }, params(tenant)))
          yield* Effect.scoped(
            Worker.make({ addons: [Concurrency.addon], concurrency: 4, pollInterval: "5 millis" }).pipe(
              Effect.andThen(whileFull(ids)),
              Effect.andThen(Deferred.succeed(release, undefined)),
              Effect.andThen(drained(30_000))
            )
          )
          return { ids, details: yield* Effect.forEach(ids, detail) }
        }).pipe(Effect.provide(env([handler])))
      })

    it.live("Skip: a job whose key has room but whose group is full is cancelled with the group's text", () =>
      Effect.gen(function* () {
        // each a Mutex in Skip mode: two of the four find the group full
        const deleted = (ids: ReadonlyArray<string>) => Effect.map(Effect.forEach(ids, stateOf), (states) => states.filter((s) => s === "Deleted").length)
        const { details } = yield* fourInPair(
          (tenant) => JobParameters.make().withMutex(tenant, "Skip", { group: "pair", limit: 2 }),
          (ids) => until(deleted(ids), (n) => n >= 2, 30_000)
        )
        const states = details.map((d) => d.job.state).sort()
        expect(states).toEqual(["Deleted", "Deleted", "Succeeded", "Succeeded"])
        for (const d of details.filter((d) => d.job.state === "Deleted")) {
          expect(d.logs.at(-1)?.message).toBe(groupCancelledText("pair", 2))
        }
      }))

    it.live("Wait with weights: a job requeued because its group is full keeps its fair-share tag (not served, not charged)", () =>
      Effect.gen(function* () {
        const tagsOf = (ids: ReadonlyArray<string>) => Effect.map(Effect.forEach(ids, detail), (ds) => ds.map((d) => d.job.fairTag))
        const groupRequeues = (ids: ReadonlyArray<string>) =>
          Effect.map(Effect.forEach(ids, detail), (ds) => ds.flatMap((d) => d.logs.filter((l) => l.message === groupRequeuedText("pair", 2))).length)
        const { details } = yield* fourInPair(
          (tenant) => JobParameters.make().withSemaphore(tenant, 1, "Wait", { total: { group: "pair", limit: 2 }, weight: 1 }),
          (ids) =>
            Effect.gen(function* () {
              // the tags given at insert (read once the worker runs: a requeue re-tags only at its finalize)
              const before = yield* tagsOf(ids)
              expect(before.every((t) => typeof t === "number")).toBe(true)
              // several requeues after that read (a requeue that took a new tag would step it by 1 / weight every time)
              const seen = yield* groupRequeues(ids)
              yield* until(groupRequeues(ids), (n) => n >= seen + 4, 30_000)
              expect(yield* tagsOf(ids)).toEqual(before)
            })
        )
        expect(details.every((d) => d.job.state === "Succeeded")).toBe(true)
      }))
  })
}

describe("Total caps: declarations", () => {
  it("refuse a bad group or group limit with InvalidPolicy", () => {
    expect(() => Semaphore("k", 2, { total: { group: " ", limit: 3 } })).toThrow(Policy.InvalidPolicy)
    expect(() => Semaphore("k", 2, { total: { group: "g", limit: 0 } })).toThrow(Policy.InvalidPolicy)
    const bad = JobParameters.make().withSemaphore("k", 2, "Wait", { group: "g", limit: 1.5 })
    expect(bad.error).toBeInstanceOf(Policy.InvalidPolicy)
    expect(bad.error?.message).toContain("limit")
    expect(JobParameters.make().withSemaphore("k", 2, "Wait", { group: "g", limit: 2 }).error).toBeUndefined()
  })
})
