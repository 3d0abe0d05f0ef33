/**
 * Admission in the claim (issue 40): the opt-in `requeue: false` (mode Wait only) leaves a job unclaimed
 * while its key is full, so its key's jobs run without requeue writes; the slots still enforce the limit.
 * Counted live at every instant, on memory and PostgreSQL.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Concurrency, Contract, Handler, JobParameters, Mutex, Policy, Publisher, Semaphore, Worker } from "warp-effect"
import { HolderCounter } from "./support/holders.js"
import { detail, drained } from "./support/runtime.js"
import { workerEnvs } from "./support/env.js"

const Work = Contract.job("ClaimAdmissionWork", Schema.Struct({ key: Schema.String, i: Schema.Number }))

for (const [name, env] of workerEnvs) {
  describe(`Admission in the claim on ${name}`, () => {
    it.live("requeue: false: never more than the limit inside, every job succeeds once, the flag is stamped", () => {
      const holders = new HolderCounter()
      const runs = new Map<string, number>()
      const handler = Handler.job(Work, ({ i, key }) =>
        holders.hold(
          key,
          Effect.andThen(Effect.yieldNow, Effect.sync(() => runs.set(`${key}/${i}`, (runs.get(`${key}/${i}`) ?? 0) + 1)))
        )
      )
      return Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const ids: Array<string> = []
        for (let i = 0; i < 8; i++) {
          for (const key of ["a", "b"]) {
            ids.push(yield* p.enqueue(Work, { key, i }, JobParameters.make().withSemaphore(key, 2, "Wait", { requeue: false })))
          }
        }
        yield* Effect.scoped(Effect.andThen(Worker.make({ addons: [Concurrency.addon], concurrency: 6, pollInterval: "5 millis" }), drained(60_000)))
        expect(holders.max.get("a")).toBeLessThanOrEqual(2)
        expect(holders.max.get("b")).toBeLessThanOrEqual(2)
        expect(runs.size === 16 && [...runs.values()].every((n) => n === 1)).toBe(true)
        const details = yield* Effect.forEach(ids, detail)
        expect(details.every((d) => d.job.state === "Succeeded")).toBe(true)
        expect((details[0]!.job.metadata as any).policies.concurrency.value.requeue).toBe(false)
        if (name === "memory") {
          // one process, claims that are single steps, and a slot given back before its row's finalizing
          // write: the claim never hands out a row of a full key, so nothing is requeued
          expect(details.flatMap((d) => d.logs.filter((l) => l.kind === "Requeued"))).toEqual([])
        }
      }).pipe(Effect.provide(env([handler])))
    })
  })
}

describe("requeue: false: declarations", () => {
  it("is refused with InvalidPolicy on any mode but Wait, and with a computed limit", () => {
    expect(() => Semaphore("k", 2, { mode: "Skip", requeue: false })).toThrow(Policy.InvalidPolicy)
    expect(() => Semaphore("k", 2, { mode: "Fifo", requeue: false })).toThrow(Policy.InvalidPolicy)
    expect(() => Semaphore("k", 2, { mode: "CancelRunning", requeue: false })).toThrow(Policy.InvalidPolicy)
    // a Mutex is Skip by default
    expect(() => Mutex("k", { requeue: false })).toThrow(/requeue: false can only be used with mode 'Wait'/)
    expect(() => Semaphore<{ n: number }>("k", (p) => p.n, { requeue: false })).toThrow(/computed limit/)
    expect(JobParameters.make().withSemaphore("k", 2, "Skip", { requeue: false }).error).toBeInstanceOf(Policy.InvalidPolicy)
    // accepted: Wait (a Semaphore's default), explicitly or not; requeue: true is the spec's default
    expect(() => Semaphore("k", 2, { requeue: false })).not.toThrow()
    expect(() => Mutex("k", { mode: "Wait", requeue: false })).not.toThrow()
    expect(() => Semaphore("k", 2, { mode: "Skip", requeue: true })).not.toThrow()
    expect(JobParameters.make().withSemaphore("k", 2, "Wait", { requeue: false, total: { group: "g", limit: 3 } }).error).toBeUndefined()
  })
})
