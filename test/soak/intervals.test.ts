import { describe, expect, it } from "@effect/vitest"
import { checkOverlaps, type Interval, summarize } from "./intervals.js"

const iv = (jobId: string, key: string | null, limit: number, entered: number, exited: number, pid = 1, claimedAt = entered - 1): Interval => ({
  jobId,
  attempt: 1,
  key,
  limit,
  proc: `p${pid}`,
  pid,
  claimedAt,
  entered,
  exited,
  exitSource: "recorded",
  result: "ok"
})

describe("overlap checker", () => {
  it("counts handlers inside per key and flags more than the limit", () => {
    const [r] = checkOverlaps([iv("a", "k", 1, 0, 10), iv("b", "k", 1, 5, 20), iv("c", "k", 1, 30, 40)])
    expect(r).toMatchObject({ key: "k", maxInside: 2, violations: 1, lostSlotOverlaps: 0 })
    expect(r!.examples[0]).toMatch(/violation on 'k'/)
  })

  it("a clean hand-off is no overlap; equal instants count as overlap (entries before exits)", () => {
    expect(checkOverlaps([iv("a", "k", 1, 0, 10), iv("b", "k", 1, 11, 20)])[0]).toMatchObject({ maxInside: 1, violations: 0 })
    expect(checkOverlaps([iv("a", "k", 1, 0, 10), iv("b", "k", 1, 10, 20)])[0]).toMatchObject({ maxInside: 2, violations: 1 })
  })

  it("honours the limit of a semaphore and ignores keyless runs", () => {
    const reports = checkOverlaps([iv("a", "s", 2, 0, 10), iv("b", "s", 2, 1, 10), iv("c", "s", 2, 2, 10), iv("x", null, 0, 0, 10)])
    expect(reports.length).toBe(1)
    expect(reports[0]).toMatchObject({ maxInside: 3, maxHolding: 3, violations: 1 })
    expect(summarize(reports)).toMatchObject({ keys: 1, intervals: 3, violations: 1 })
  })

  it("a holder whose process lost its connections at T stops holding at T: a later entrant is a lost-slot overlap, not a violation", () => {
    const intervals = [iv("a", "k", 1, 0, 100, 1), iv("b", "k", 1, 60, 80, 2)]
    expect(checkOverlaps(intervals, [{ pid: 1, at: 50, keys: ["k"] }])[0]).toMatchObject({
      maxInside: 2,
      maxHolding: 1,
      violations: 0,
      lostSlotOverlaps: 1
    })
    // entering before the termination is still a violation
    expect(checkOverlaps([iv("a", "k", 1, 0, 100, 1), iv("b", "k", 1, 40, 80, 2)], [{ pid: 1, at: 50, keys: ["k"] }])[0]).toMatchObject({
      violations: 1
    })
    // a termination of another process, or of a process not holding the key, explains nothing
    expect(checkOverlaps(intervals, [{ pid: 2, at: 50, keys: ["k"] }])[0]).toMatchObject({ violations: 1 })
    expect(checkOverlaps(intervals, [{ pid: 1, at: 50, keys: ["other"] }])[0]).toMatchObject({ violations: 1 })
    // nor does a termination before the holder's claim
    expect(checkOverlaps([iv("a", "k", 1, 60, 100, 1, 55), iv("b", "k", 1, 70, 80, 2)], [{ pid: 1, at: 50, keys: ["k"] }])[0]).toMatchObject({
      violations: 1
    })
  })

  it("a termination is a window: inside at its start with the key held, or entering inside it, stops holding; the window explains nothing else", () => {
    const window = { pid: 1, from: 50, at: 60, keys: ["k"] }
    // a: inside at the start, key among the victims' locks; b: same process, entered inside the window
    // (its slot may be on a victim backend); c: another process, takes the freed slot
    const ok = checkOverlaps([iv("a", "k", 1, 0, 100, 1), iv("b", "k", 1, 55, 90, 1), iv("c", "k", 1, 58, 80, 2)], [window])[0]
    expect(ok).toMatchObject({ maxInside: 3, maxHolding: 1, violations: 0, lostSlotOverlaps: 1 })
    // claimed before the window ended, entered after it: its slot may have been taken on a victim
    // backend after the victims' locks were read (key held at the start or not)
    expect(checkOverlaps([iv("a", "k", 1, 70, 100, 1, 40), iv("c", "k", 1, 75, 80, 2)], [window])[0]).toMatchObject({ violations: 0 })
    expect(checkOverlaps([iv("a", "k", 1, 70, 100, 1, 55), iv("c", "k", 1, 75, 80, 2)], [{ ...window, keys: [] }])[0]).toMatchObject({
      violations: 0
    })
    // claimed and entered after the window: a fresh slot, so a second holder is a violation
    expect(checkOverlaps([iv("a", "k", 1, 70, 100, 1, 65), iv("c", "k", 1, 75, 80, 2)], [window])[0]).toMatchObject({ violations: 1 })
    // inside at the start but its key not among the victims' locks: still holding
    expect(checkOverlaps([iv("a", "k", 1, 0, 100, 1), iv("c", "k", 1, 58, 80, 2)], [{ ...window, keys: ["other"] }])[0]).toMatchObject({
      violations: 1
    })
  })
})
