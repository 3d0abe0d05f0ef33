/**
 * What a worker's lanes do with the store's hints, the pickup's bookkeeping alone (no store):
 * - busy lanes and high-priority work (issue 42's priority under a backlog): a `Due` hint of rows above
 *   the default priority that no idle lane takes tells busy lanes to claim one row ahead of the batch
 *   they hold; the hint's priority travels in the PostgreSQL store's notification payload;
 * - a freed slot (`Freed`) reaches one lane, which drops its skip of the key (issue 40: every lane
 *   dropping it made each claim the key's next job, all but one to requeue it).
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
      expect(a.urgent(() => 0, () => now)).toBe(false)
      yield* p.hint({ _tag: "Due", count: 2, priority: 5 })
      // a lane whose batch holds a row of priority 5 or more is not asked
      expect(a.urgent(() => 5, () => now)).toBe(false)
      expect(a.urgent(() => 0, () => now)).toBe(true)
      expect(b.urgent(() => 4, () => now)).toBe(true)
      // two rows, two lanes
      expect(b.urgent(() => 0, () => now)).toBe(false)
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
      expect(busy.urgent(() => 0, () => Date.now())).toBe(false)
      yield* p.hint({ _tag: "Due", count: 3 })
      expect(busy.urgent(() => -10, () => Date.now())).toBe(false)
    }).pipe(Effect.scoped))

  it.live("a lane's own claim takes urgent rows; they lapse after a poll interval", () =>
    Effect.gen(function* () {
      const p = yield* pickup
      const a = p.join(() => {})
      yield* p.hint({ _tag: "Due", count: 2, priority: 1 })
      a.claiming(1)
      expect(a.urgent(() => 0, () => Date.now())).toBe(true)
      expect(a.urgent(() => 0, () => Date.now())).toBe(false)
      yield* p.hint({ _tag: "Due", count: 1, priority: 1 })
      expect(a.urgent(() => 0, () => Date.now() + 1_001)).toBe(false)
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

describe("a freed slot reaches one lane", () => {
  /** A lane that records the keys it was told to forget. */
  const lane = (p: Pickup.Pickup) => {
    const forgot: Array<string> = []
    return { wake: p.join((key) => void forgot.push(key)), forgot }
  }

  it.live("a lane backing off on the key is told first, and only it", () =>
    Effect.gen(function* () {
      const p = yield* pickup
      const [a, b, c] = [lane(p), lane(p), lane(p)]
      const backingOff = yield* Effect.forkChild(b.wake.idleOn("k"))
      const asleep = yield* Effect.forkChild(c.wake.idle(c.wake.epoch()))
      yield* Effect.yieldNow
      yield* p.hint({ _tag: "Freed", key: "k" })
      yield* Fiber.join(backingOff)
      expect([a.forgot, b.forgot, c.forgot]).toEqual([[], ["k"], []])
      // the sleeping lane sleeps on
      expect(asleep.pollUnsafe()).toBeUndefined()
      yield* Fiber.interrupt(asleep)
    }).pipe(Effect.scoped))

  it.live("else one sleeping lane wakes and forgets the key; the others sleep on", () =>
    Effect.gen(function* () {
      const p = yield* pickup
      const [a, b, c] = [lane(p), lane(p), lane(p)]
      const sleepers = [yield* Effect.forkChild(b.wake.idle(b.wake.epoch())), yield* Effect.forkChild(c.wake.idle(c.wake.epoch()))]
      yield* Effect.yieldNow
      yield* p.hint({ _tag: "Freed", key: "k" })
      // the lane that slept last wakes (the likeliest still warm)
      yield* Fiber.join(sleepers[1]!)
      expect([a.forgot, b.forgot, c.forgot]).toEqual([[], [], ["k"]])
      expect(sleepers[0]!.pollUnsafe()).toBeUndefined()
      yield* Fiber.interrupt(sleepers[0]!)
    }).pipe(Effect.scoped))

  it.live("else (every lane busy) one lane is told, so the key's job is not left to the skips' end", () =>
    Effect.gen(function* () {
      const p = yield* pickup
      const lanes = [lane(p), lane(p), lane(p)]
      yield* p.hint({ _tag: "Freed", key: "k" })
      expect(lanes.flatMap((l) => l.forgot)).toEqual(["k"])
    }).pipe(Effect.scoped))
})
