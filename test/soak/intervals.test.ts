import { describe, expect, it } from "@effect/vitest"
import { asGroup, checkOverlaps, type Interval, summarize } from "./intervals.js"

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
    expect(r).toMatchObject({ key: "k", maxInside: 2, violations: 1, afterLostSlot: 0 })
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

  it("no leniency: a later entrant while a holder whose connections were terminated still runs is a violation, counted as after a lost slot", () => {
    const intervals = [iv("a", "k", 1, 0, 100, 1), iv("b", "k", 1, 60, 80, 2)]
    expect(checkOverlaps(intervals, [{ pid: 1, at: 50, keys: ["k"] }])[0]).toMatchObject({
      maxInside: 2,
      maxHolding: 1,
      violations: 1,
      afterLostSlot: 1
    })
    // entering before the termination: two holders at once
    expect(checkOverlaps([iv("a", "k", 1, 0, 100, 1), iv("b", "k", 1, 40, 80, 2)], [{ pid: 1, at: 50, keys: ["k"] }])[0]).toMatchObject({
      violations: 1,
      afterLostSlot: 0
    })
    // a termination of another process, or of a process not holding the key, explains nothing
    expect(checkOverlaps(intervals, [{ pid: 2, at: 50, keys: ["k"] }])[0]).toMatchObject({ violations: 1, afterLostSlot: 0 })
    expect(checkOverlaps(intervals, [{ pid: 1, at: 50, keys: ["other"] }])[0]).toMatchObject({ violations: 1, afterLostSlot: 0 })
    // nor does a termination before the holder's claim
    expect(checkOverlaps([iv("a", "k", 1, 60, 100, 1, 55), iv("b", "k", 1, 70, 80, 2)], [{ pid: 1, at: 50, keys: ["k"] }])[0]).toMatchObject({
      violations: 1,
      afterLostSlot: 0
    })
    // a hand-off after the lost holder exited is no violation
    expect(checkOverlaps([iv("a", "k", 1, 0, 55, 1), iv("b", "k", 1, 60, 80, 2)], [{ pid: 1, at: 50, keys: ["k"] }])[0]).toMatchObject({
      violations: 0,
      afterLostSlot: 0
    })
  })

  it("a termination is a window: inside at its start with the key held, or entering inside it, stops holding (for the diagnosis only)", () => {
    const window = { pid: 1, from: 50, at: 60, keys: ["k"] }
    // a: inside at the start, key among the victims' locks; b: same process, entered inside the window
    // (its slot may be on a victim backend); c: another process, takes the freed slot
    const lost = checkOverlaps([iv("a", "k", 1, 0, 100, 1), iv("b", "k", 1, 55, 90, 1), iv("c", "k", 1, 58, 80, 2)], [window])[0]
    expect(lost).toMatchObject({ maxInside: 3, maxHolding: 1, violations: 1, afterLostSlot: 1 })
    // claimed before the window ended, entered after it: its slot may have been taken on a victim
    // backend after the victims' locks were read
    expect(checkOverlaps([iv("a", "k", 1, 70, 100, 1, 40), iv("c", "k", 1, 75, 80, 2)], [window])[0]).toMatchObject({ violations: 1, afterLostSlot: 1 })
    // claimed and entered after the window: a fresh slot, so a second holder holds one too
    expect(checkOverlaps([iv("a", "k", 1, 70, 100, 1, 65), iv("c", "k", 1, 75, 80, 2)], [window])[0]).toMatchObject({ violations: 1, afterLostSlot: 0 })
    // inside at the start but its key not among the victims' locks: still holding
    expect(checkOverlaps([iv("a", "k", 1, 0, 100, 1), iv("c", "k", 1, 58, 80, 2)], [{ ...window, keys: ["other"] }])[0]).toMatchObject({
      violations: 1,
      afterLostSlot: 0
    })
  })

  it("a group over several keys: runs of different keys count against the group's total; other keys do not", () => {
    const runs = [iv("a", "t1", 2, 0, 10), iv("b", "t2", 2, 5, 20), iv("c", "t3", 2, 6, 8), iv("x", "outside", 1, 0, 30)]
    const group = new Set(["t1", "t2", "t3"])
    // total 3: three inside at 6..8, no more
    expect(checkOverlaps(asGroup(runs, group, "g", 3))).toEqual([expect.objectContaining({ key: "g", limit: 3, intervals: 3, maxInside: 3, violations: 0 })])
    // total 2: the third run is one too many, though every key is within its own limit
    expect(checkOverlaps(asGroup(runs, group, "g", 2))[0]).toMatchObject({ maxInside: 3, violations: 1 })
    expect(checkOverlaps(runs).every((r) => r.violations === 0)).toBe(true)
    // a terminated holder of the group's lock: a violation as for a key, diagnosed as after a lost slot
    const lost = checkOverlaps(asGroup([iv("a", "t1", 2, 0, 100, 1), iv("b", "t2", 2, 60, 80, 2)], group, "g", 1), [{ pid: 1, at: 50, keys: ["g"] }])[0]
    expect(lost).toMatchObject({ violations: 1, afterLostSlot: 1 })
  })

  it("a pause past the deadline: an overlap of runs recorded as lapsed is diagnosis, any other overlap stays a violation", () => {
    // a: paused from 50 (process 1) and recorded lapsed; b takes the slot at 60 while a sleeps
    const paused = [iv("a", "k", 1, 0, 100, 1), iv("b", "k", 1, 60, 80, 2)]
    const lapse = { jobId: "a", attempt: 1, at: 50 }
    expect(checkOverlaps(paused, [], [lapse])[0]).toMatchObject({ maxInside: 2, violations: 0, overlapsOfLapsedRuns: 1 })
    expect(checkOverlaps(paused, [], [lapse])[0]!.lapsedExamples[0]).toMatch(/overlap of lapsed runs on 'k'.*a#1@p1 \(lapsed\)/)
    // the same overlap without the lapse record: a violation
    expect(checkOverlaps(paused)[0]).toMatchObject({ violations: 1, overlapsOfLapsedRuns: 0 })
    // a second entrant before the pause began: two counted runs at once, a violation
    expect(checkOverlaps([iv("a", "k", 1, 0, 100, 1), iv("b", "k", 1, 40, 80, 2)], [], [lapse])[0]).toMatchObject({ violations: 1, overlapsOfLapsedRuns: 0 })
    // a lapsed run leaves the count, the others do not: three inside at limit 1 with one lapsed is a violation
    expect(checkOverlaps([...paused, iv("c", "k", 1, 70, 75, 3)], [], [lapse])[0]).toMatchObject({ maxInside: 3, violations: 1, overlapsOfLapsedRuns: 0 })
    // a lapse record of another run explains nothing
    expect(checkOverlaps(paused, [], [{ ...lapse, jobId: "other" }])[0]).toMatchObject({ violations: 1, overlapsOfLapsedRuns: 0 })
  })

  it("a run whose recorded end precedes its entry (its process's death read before the kill, the entry landing after) ends at its entry", () => {
    const r = checkOverlaps([iv("a", "k", 1, 10, 5), iv("b", "k", 1, 20, 30), iv("c", "k", 1, 40, 50)])[0]
    expect(r).toMatchObject({ maxInside: 1, violations: 0 })
    // it still overlaps what is inside at its entry
    expect(checkOverlaps([iv("a", "k", 1, 10, 5), iv("b", "k", 1, 0, 30)])[0]).toMatchObject({ violations: 1 })
  })
})
