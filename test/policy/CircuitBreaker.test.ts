import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/testing/TestClock"
import * as SqlClient from "effect/sql/SqlClient"
import {
  CircuitBreaker,
  CircuitBreakerAddon,
  Contract,
  Handler,
  JobStoreMemory,
  JobStorePg,
  Policy,
  Publisher,
  Retry,
  Worker
} from "warp-effect"
import { openText } from "../../src/internal/circuitbreaker/CircuitBreakerBehavior.js"
import * as CircuitBreakerState from "../../src/internal/circuitbreaker/CircuitBreakerState.js"
import type { JobStore } from "../../src/internal/store/JobStore.js"
import { freshPgLayer } from "../support/db.js"
import { deploy, until } from "./env.js"

const { Admission } = CircuitBreakerState

/**
 * The state machine, step by step. `pass(ms)` lets `ms` of the breaker's clock go by: TestClock on
 * memory, the database's own clock on PostgreSQL (where the test waits it out).
 */
const stateMachine = (state: CircuitBreakerState.CircuitBreakerStateService, pass: (ms: number) => Effect.Effect<void>, cooldownMs: number) =>
  Effect.gen(function* () {
    const p = new Policy.CircuitBreakerPolicy({ group: "db", threshold: 3, cooldownMs })
    const tag = (job: string) => Effect.map(state.admit(p, job), (a) => a._tag)
    const failures = Effect.map(state.status("db"), Option.match({ onNone: () => 0, onSome: (s) => s.consecutiveFailures }))

    // closed: failures add up, a success resets them
    expect(yield* tag("a")).toBe("Closed")
    yield* state.record(p, "a", "failure", false)
    yield* state.record(p, "b", "failure", false)
    expect(yield* failures).toBe(2)
    yield* state.record(p, "c", "success", false)
    expect(yield* failures).toBe(0)
    expect(yield* tag("d")).toBe("Closed")

    // the threshold-th consecutive failure opens it for the cool-down
    for (const j of ["d", "e", "f"]) yield* state.record(p, j, "failure", false)
    const open = yield* state.admit(p, "g")
    expect(open._tag).toBe("Open")
    const until = (open as Extract<CircuitBreakerState.Admission, { _tag: "Open" }>).until
    // late results of attempts admitted while closed change nothing
    yield* state.record(p, "late", "failure", false)
    yield* state.record(p, "late", "success", false)
    expect((yield* state.admit(p, "g"))).toEqual(Admission.Open({ until }))
    expect(Option.getOrThrow(yield* state.status("db")).openedUntil).toEqual(until)

    // half-open: exactly one probe; the others are told to come back shortly
    yield* pass(cooldownMs)
    expect(yield* tag("probe-1")).toBe("Probe")
    const waiting = yield* state.admit(p, "h")
    expect(waiting._tag).toBe("Probing")
    expect(yield* tag("i")).toBe("Probing")
    // a failed probe opens it again for a whole cool-down
    yield* state.record(p, "probe-1", "failure", true)
    expect(yield* tag("j")).toBe("Open")
    yield* pass(cooldownMs)
    // an interrupted probe hands the probe to the next attempt
    expect(yield* tag("probe-2")).toBe("Probe")
    yield* state.record(p, "probe-2", "neutral", true)
    expect(yield* tag("probe-3")).toBe("Probe")
    // a probe that never reports lapses after one cool-down
    yield* pass(cooldownMs)
    expect(yield* tag("probe-4")).toBe("Probe")
    // only the current probe's result counts; its success closes the breaker
    yield* state.record(p, "probe-3", "success", true)
    expect(yield* tag("k")).toBe("Probing")
    yield* state.record(p, "probe-4", "success", true)
    expect(yield* tag("l")).toBe("Closed")
    expect(yield* failures).toBe(0)
    expect(yield* state.reset("db")).toBe(true)
    expect(yield* state.status("db")).toEqual(Option.none())
  })

describe("circuit-breaker state", () => {
  it.effect("memory (TestClock): closed -> open -> half-open probe -> closed", () =>
    Effect.gen(function* () {
      const state = yield* CircuitBreakerState.makeMemory
      yield* TestClock.adjust("10 seconds")
      yield* stateMachine(state, (ms) => TestClock.adjust(ms), 1000)
    }))

  it.live("PostgreSQL: the same machine, on the database clock", () =>
    Effect.gen(function* () {
      const state = yield* CircuitBreakerState.makePg
      yield* stateMachine(state, (ms) => Effect.sleep(ms + 20), 600)
    }).pipe(Effect.provide(JobStorePg.layer.pipe(Layer.provideMerge(freshPgLayer(5))))))

  it.live("PostgreSQL: of many workers asking at once when the cool-down ends, exactly one probes", () =>
    Effect.gen(function* () {
      const state = yield* CircuitBreakerState.makePg
      const sql = yield* SqlClient.SqlClient
      // open every pool connection first, so the burst below is not spread out by connecting
      yield* Effect.all(Array.from({ length: 16 }, () => sql`SELECT pg_sleep(0.02)`), { concurrency: "unbounded" })
      const p = new Policy.CircuitBreakerPolicy({ group: "api", threshold: 1, cooldownMs: 500 })
      yield* state.record(p, "x", "failure", false)
      yield* Effect.sleep(530)
      const answers = yield* Effect.all(Array.from({ length: 16 }, (_, i) => state.admit(p, `job-${i}`)), { concurrency: "unbounded" })
      expect(answers.filter((a) => a._tag === "Probe").length).toBe(1)
      expect(answers.filter((a) => a._tag === "Probing").length).toBe(15)
    }).pipe(Effect.provide(JobStorePg.layer.pipe(Layer.provideMerge(freshPgLayer(20))))))
})

const setups: ReadonlyArray<readonly [string, () => Layer.Layer<JobStore | CircuitBreakerState.CircuitBreakerState, unknown>]> = [
  ["memory", () => Layer.merge(JobStoreMemory.layer, CircuitBreakerAddon.layerMemory)],
  [
    "postgres",
    () =>
      Layer.merge(JobStorePg.layer, CircuitBreakerAddon.layer).pipe(
        Layer.provideMerge(freshPgLayer(20) as Layer.Layer<SqlClient.SqlClient, unknown>)
      )
  ]
]

for (const [name, infra] of setups) {
  describe(`circuit-breaker addon on ${name}`, () => {
    it.live("failures (retried ones included) open the group's breaker for every worker; the probe closes it", () => {
      const Charge = Contract.job("Charge", Schema.Struct({ i: Schema.Number }), {
        policy: [CircuitBreaker("payments", 2, "1 second"), Retry(2, { initialDelay: "10 millis" })]
      })
      let down = true
      const runs: Array<number> = []
      return Effect.gen(function* () {
        const probeInside = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const handler = Handler.job(Charge, ({ i }) =>
          Effect.gen(function* () {
            runs.push(i)
            if (down) return yield* Effect.fail("payment provider down")
            yield* Deferred.succeed(probeInside, undefined)
            yield* Deferred.await(release)
          })
        )
        yield* Effect.gen(function* () {
          const state = yield* CircuitBreakerState.CircuitBreakerState
          const p = yield* Publisher.Publisher
          yield* Effect.scoped(
            Effect.gen(function* () {
              yield* Worker.make({ concurrency: 2, pollInterval: "5 millis", workerId: "w1", addons: [CircuitBreakerAddon.addon] })
              yield* Worker.make({ concurrency: 2, pollInterval: "5 millis", workerId: "w2", addons: [CircuitBreakerAddon.addon] })
              // one job: its first failure is retried (still counted), its second is final -> threshold 2 reached
              const first = yield* p.enqueue(Charge, { i: 1 })
              yield* until(first, (d) => d.job.state === "Failed")
              const s = Option.getOrThrow(yield* state.status("payments"))
              expect(s.consecutiveFailures).toBe(2)
              expect(s.openedUntil).not.toBeNull()
              // open: later jobs are requeued to the end of the cool-down without running
              const [a, b] = [yield* p.enqueue(Charge, { i: 2 }), yield* p.enqueue(Charge, { i: 3 })]
              for (const id of [a, b]) {
                // (the row is read before its logs: wait for the row itself to show the requeue)
                const d = yield* until(id, (d) => d.job.state === "Scheduled")
                const l = d.logs.find((l) => l.kind === "Requeued")!
                expect(l.message).toBe(openText("payments", s.openedUntil!))
                expect(d.job.scheduleTime.getTime()).toBeGreaterThanOrEqual(s.openedUntil!.getTime())
              }
              expect(runs).toEqual([1, 1])
              down = false
              // half-open: one of them probes (and blocks); the other is held back while it runs
              yield* Deferred.await(probeInside)
              yield* Effect.raceFirst(
                until(a, (d) => d.logs.some((l) => l.message.includes("half-open"))),
                until(b, (d) => d.logs.some((l) => l.message.includes("half-open")))
              )
              expect(runs.length).toBe(3)
              yield* Deferred.succeed(release, undefined)
              yield* until(a, (d) => d.job.state === "Succeeded")
              yield* until(b, (d) => d.job.state === "Succeeded")
            })
          )
          expect(runs.filter((i) => i === 2).length + runs.filter((i) => i === 3).length).toBe(2)
          const closed = Option.getOrThrow(yield* state.status("payments"))
          expect(closed.consecutiveFailures).toBe(0)
          expect(closed.openedUntil).toBeNull()
        }).pipe(Effect.provide(deploy({ handlers: [handler] })))
      }).pipe(Effect.provide(infra()))
    })
  })
}
