/**
 * Busy lanes and high-priority work (issue 42's priority under a backlog): a `Due` hint of rows above
 * the default priority that no idle lane takes tells busy lanes to claim one row ahead of the batch they
 * hold; the hint's priority travels in the PostgreSQL store's notification payload.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import type { JobStoreService } from "../src/internal/store/JobStore.js"
import { decode, insertPayload, insertSummary } from "../src/internal/store/Wakeup.js"
import * as Pickup from "../src/internal/worker/Pickup.js"
import * as WorkerState from "../src/internal/worker/WorkerState.js"

/** A pickup on a store whose hints come only through `Pickup.hint`. */
const pickup = Effect.gen(function* () {
  const store = { wakeups: Effect.succeed(Stream.never) } as unknown as JobStoreService
  const state = yield* WorkerState.make(WorkerState.config({ pollInterval: "1 second" } as any))
  return yield* Pickup.make(store, state)
})

describe("busy lanes claim high-priority rows ahead of their batch", () => {
  it.live("rows no idle lane took are urgent for busy lanes of a lower priority, one lane per row", () =>
    Effect.gen(function* () {
      const p = yield* pickup
      const a = p.join(() => {})
      const b = p.join(() => {})
      const now = Date.now()
      expect(a.urgent(0, now)).toBe(false)
      yield* p.hint({ _tag: "Due", count: 2, priority: 5 })
      // a lane whose batch holds a row of priority 5 or more is not asked
      expect(a.urgent(5, now)).toBe(false)
      expect(a.urgent(0, now)).toBe(true)
      expect(b.urgent(4, now)).toBe(true)
      // two rows, two lanes
      expect(b.urgent(0, now)).toBe(false)
    }).pipe(Effect.scoped))

  it.live("an idle lane woken for the row leaves nothing urgent; the default priority never is", () =>
    Effect.gen(function* () {
      const p = yield* pickup
      const sleeper = p.join(() => {})
      const busy = p.join(() => {})
      const asleep = yield* Effect.forkChild(sleeper.idle(sleeper.epoch()))
      yield* Effect.yieldNow
      yield* p.hint({ _tag: "Due", count: 1, priority: 5 })
      yield* Fiber.join(asleep)
      expect(busy.urgent(0, Date.now())).toBe(false)
      yield* p.hint({ _tag: "Due", count: 3 })
      expect(busy.urgent(-10, Date.now())).toBe(false)
    }).pipe(Effect.scoped))

  it.live("a lane's own claim takes urgent rows; they lapse after a poll interval", () =>
    Effect.gen(function* () {
      const p = yield* pickup
      const a = p.join(() => {})
      yield* p.hint({ _tag: "Due", count: 2, priority: 1 })
      a.claiming(1)
      expect(a.urgent(0, Date.now())).toBe(true)
      expect(a.urgent(0, Date.now())).toBe(false)
      yield* p.hint({ _tag: "Due", count: 1, priority: 1 })
      expect(a.urgent(0, Date.now() + 1_001)).toBe(false)
    }).pipe(Effect.scoped))

  it("the notification payload carries the due rows' highest priority when it is not 0", () => {
    const now = 1_000
    const rows = [
      { state: "Enqueued", scheduleTime: new Date(0), priority: 3 },
      { state: "Enqueued", scheduleTime: new Date(0), priority: 7 },
      { state: "Scheduled", scheduleTime: new Date(5_000), priority: 9 }
    ]
    const { due, earliest, priority } = insertSummary(rows, now)
    expect([due, earliest, priority]).toEqual([2, 5_000, 7])
    expect(insertPayload(due, earliest, priority)).toBe("d2p7@5000")
    expect(decode("d2p7@5000", now)).toEqual([{ _tag: "Due", count: 2, priority: 7 }, { _tag: "Future", inMs: 4_000 }])
    expect(decode("d1p-3", now)).toEqual([{ _tag: "Due", count: 1, priority: -3 }])
    // the default priority: the payload of before
    expect(insertPayload(2, undefined, 0)).toBe("d2")
    expect(decode("d2", now)).toEqual([{ _tag: "Due", count: 2 }])
  })
})
