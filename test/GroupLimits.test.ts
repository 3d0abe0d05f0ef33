/**
 * Admin overrides of total caps (`ConcurrencyLimitManager.addOrUpdateGroupLimit` and friends): the
 * manager's rules on memory and PostgreSQL, and the cap in force at pickup through a worker — an
 * override below and above the declared `total.limit`, and its removal — counted live at every instant.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { Concurrency, ConcurrencyLimitManager, Contract, Handler, JobParameters, Publisher, Worker } from "warp-effect"
import { groupRequeuedText } from "../src/internal/concurrency/ConcurrencyBehavior.js"
import { freshPgLayer } from "./support/db.js"
import { workerEnvs } from "./support/env.js"
import { HolderCounter } from "./support/holders.js"
import { detail, drained } from "./support/runtime.js"

const { ConcurrencyLimitManager: Limits } = ConcurrencyLimitManager

const managerLayers = [
  ["memory", () => ConcurrencyLimitManager.layerMemory],
  ["postgres", () => ConcurrencyLimitManager.layerPg.pipe(Layer.provideMerge(freshPgLayer(4)))]
] as const

for (const [name, layer] of managerLayers) {
  describe(`group overrides on ${name}`, () => {
    it.live("adds, updates, gets, lists (by group) and removes; a group and a key of one name are apart", () =>
      Effect.gen(function* () {
        const limits = yield* Limits
        expect(yield* limits.listGroupLimits).toEqual([])
        yield* limits.addOrUpdateGroupLimit("exports", 3)
        yield* limits.addOrUpdateGroupLimit("emails", 10)
        yield* limits.addOrUpdateLimit("exports", 7)
        const first = Option.getOrThrow(yield* limits.getGroupLimit("exports"))
        expect([first.group, first.slots]).toEqual(["exports", 3])
        expect(first.updatedAt).toBeInstanceOf(Date)
        expect(first.expiresAt).toBeUndefined()
        yield* limits.addOrUpdateGroupLimit("exports", 5)
        expect((yield* limits.listGroupLimits).map((g) => [g.group, g.slots])).toEqual([
          ["emails", 10],
          ["exports", 5]
        ])
        // the key's override is its own
        expect(Option.getOrThrow(yield* limits.get("exports")).slots).toBe(7)
        expect(yield* limits.removeGroupLimit("exports")).toBe(true)
        expect(yield* limits.removeGroupLimit("exports")).toBe(false)
        expect(yield* limits.getGroupLimit("exports")).toEqual(Option.none())
        expect(Option.getOrThrow(yield* limits.get("exports")).slots).toBe(7)
        expect((yield* limits.list).map((l) => l.key)).toEqual(["exports"])
      }).pipe(Effect.provide(layer())))

    it.live("refuses bad groups, slots and expiries with InvalidPolicy, writing nothing; expiries as for keys", () =>
      Effect.gen(function* () {
        const limits = yield* Limits
        yield* limits.addOrUpdateGroupLimit("g", 2)
        const attempts: ReadonlyArray<readonly [unknown, unknown, unknown]> = [
          ["g", 0, undefined],
          ["g", 1.5, undefined],
          ["g", Number.NaN, undefined],
          ["", 2, undefined],
          ["  ", 2, undefined],
          ["nul\u0000group", 2, undefined],
          ["g", 2, { expiresIn: "-1 second" }],
          ["g", 2, { expiresAt: new Date(Number.NaN) }],
          ["g", 2, { expiresAt: new Date(), expiresIn: "1 minute" }]
        ]
        for (const [group, slots, expiry] of attempts) {
          const error = yield* Effect.flip(limits.addOrUpdateGroupLimit(group as string, slots as number, expiry as any))
          expect(error._tag, `${String(group)} / ${String(slots)}`).toBe("InvalidPolicy")
          expect(error.message, `${String(group)}`).toContain("ConcurrencyLimitManager.addOrUpdateGroupLimit")
        }
        expect((yield* limits.listGroupLimits).map((g) => [g.group, g.slots])).toEqual([["g", 2]])
        expect(yield* limits.getGroupLimit("nul\u0000group")).toEqual(Option.none())
        // an expiry already past is never returned; a future one is, with its instant
        yield* limits.addOrUpdateGroupLimit("past", 2, { expiresAt: new Date(Date.now() - 60_000) })
        const at = new Date(Date.now() + 3_600_000)
        yield* limits.addOrUpdateGroupLimit("future", 4, { expiresAt: at })
        expect(yield* limits.getGroupLimit("past")).toEqual(Option.none())
        expect(Option.getOrThrow(yield* limits.getGroupLimit("future")).expiresAt?.getTime()).toBe(at.getTime())
        expect((yield* limits.listGroupLimits).map((g) => g.group)).toEqual(["future", "g"])
        expect(yield* limits.removeGroupLimit("past")).toBe(false)
      }).pipe(Effect.provide(layer())))
  })
}

const Export = Contract.job("GroupLimitExport", Schema.Struct({ tenant: Schema.String, i: Schema.Number }))
const TENANTS = ["t1", "t2", "t3", "t4", "t5", "t6"]
const DECLARED = 2

/**
 * Runs 3 jobs of each of 6 tenants (each `Semaphore(tenant, 1)`, group `exports` declared at 2) on 8
 * lanes. A handler stays inside until the group holds `expected.n` (at most 300 ms: the last jobs cannot
 * fill it), so the cap in force is reached however loaded the machine is.
 */
const observeGroup = () => {
  const holders = new HolderCounter()
  const expected = { n: 1 }
  const handler = Handler.job(Export, ({ tenant }) =>
    holders.hold(
      "group",
      holders.hold(
        tenant,
        Effect.sleep("5 millis").pipe(Effect.repeat({ until: () => holders.current("group") >= expected.n }), Effect.timeout("300 millis"), Effect.ignore)
      )
    )
  )
  return { handler, holders, expected }
}

/** One run of the 18 jobs (see {@link observeGroup}): every job Succeeded; the audit texts of the requeues. */
const runGroup = (holders: HolderCounter) =>
  Effect.gen(function* () {
    holders.max.clear()
    const p = yield* Publisher.Publisher
    const ids: Array<string> = []
    for (let i = 0; i < 3; i++) {
      for (const tenant of TENANTS) {
        ids.push(yield* p.enqueue(Export, { tenant, i }, JobParameters.make().withSemaphore(tenant, 1, "Wait", { group: "exports", limit: DECLARED })))
      }
    }
    yield* Effect.scoped(Effect.andThen(Worker.make({ addons: [Concurrency.addon], concurrency: 8, pollInterval: "5 millis" }), drained(60_000)))
    for (const tenant of TENANTS) expect(holders.max.get(tenant) ?? 0, tenant).toBeLessThanOrEqual(1)
    const details = yield* Effect.forEach(ids, detail)
    expect(details.every((d) => d.job.state === "Succeeded")).toBe(true)
    return details.flatMap((d) => d.logs.filter((l) => l.kind === "Requeued").map((l) => l.message))
  })

for (const [name, env] of workerEnvs) {
  describe(`a group override at pickup on ${name}`, () => {
    it.live("an override below the declared total (1 < 2) is the cap in force, with its number in any requeue's audit text", () => {
      const { expected, handler, holders } = observeGroup()
      expected.n = 1
      return Effect.gen(function* () {
        yield* (yield* Limits).addOrUpdateGroupLimit("exports", 1)
        const requeues = yield* runGroup(holders)
        expect(holders.max.get("group")).toBe(1)
        // the claim leaves the rows of the full group unclaimed (docs/claim-admission.md): a requeue for
        // the group is left for two claims racing for its slot, and then names the cap in force
        for (const text of requeues.filter((m) => m.includes("group"))) expect(text).toBe(groupRequeuedText("exports", 1))
      }).pipe(Effect.provide(env([handler])))
    })

    it.live("an override above the declared total (4 > 2) lets 4 in and never more; removed, the declared 2 applies again", () => {
      const { expected, handler, holders } = observeGroup()
      return Effect.gen(function* () {
        const limits = yield* Limits
        yield* limits.addOrUpdateGroupLimit("exports", 4)
        expected.n = 4
        yield* runGroup(holders)
        expect(holders.max.get("group")).toBe(4)
        expect(yield* limits.removeGroupLimit("exports")).toBe(true)
        expected.n = DECLARED
        yield* runGroup(holders)
        expect(holders.max.get("group")).toBe(DECLARED)
      }).pipe(Effect.provide(env([handler])))
    })
  })
}
