/**
 * The dashboard's pure parts: filters read from and written to URLs, the pager's text, relative
 * times and durations read from a trail.
 */
import * as Result from "effect/Result"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Filters from "../../src/internal/dashboard/Filters.js"
import { pagerText } from "../../src/internal/dashboard/JobsPage.js"
import * as Time from "../../src/internal/dashboard/Time.js"
import { Job, type JobLog } from "../../src/internal/job/Job.js"
import { JobState } from "../../src/internal/job/JobState.js"

const text = fc.string({ minLength: 1, maxLength: 40 }).filter((s) => s.trim() !== "" && !s.includes("\u0000") && !/[\uD800-\uDFFF]/.test(s))
const time = fc.date({ min: new Date("2000-01-01T00:00:00Z"), max: new Date("2099-12-31T23:59:59Z"), noInvalidDate: true })

describe("filters", () => {
  it("round-trip through the URL: what the pager and tabs write is what the page reads", () => {
    fc.assert(
      fc.property(
        fc.record(
          { id: text, key: text, type: text, jobKey: text, state: fc.constantFrom(...JobState.literals), after: time, before: time },
          { requiredKeys: [] }
        ),
        (f) => {
          const params = Object.fromEntries(Filters.toParams(f))
          expect(Filters.parse(params)).toEqual(
            Result.succeed({ id: f.id, key: f.key, type: f.type, ...(f.jobKey === undefined ? {} : { jobKey: f.jobKey }), state: f.state, after: f.after, before: f.before })
          )
        }
      )
    )
  })

  it("refuses bad values with a message, and treats empty fields as not filtered", () => {
    const bad: ReadonlyArray<[Record<string, string | ReadonlyArray<string>>, RegExp]> = [
      [{ state: "Running" }, /no job state called "Running"/],
      [{ after: "2026-02-30" }, /Created after must be a date/],
      [{ after: "2026-12-05T25:00" }, /Created after must be a date/],
      [{ before: "tomorrow" }, /Created before must be a date/],
      [{ id: "a\u0000b" }, /Id must not contain a NUL/],
      [{ type: "\uD800" }, /Type must be valid Unicode/],
      [{ key: "k".repeat(513) }, /Key must be at most 512 characters \(got 513\)/],
      [{ jobKey: "k".repeat(513) }, /Job key must be at most 512 characters \(got 513\)/],
      [{ state: ["Failed", "Deleted"] }, /given more than once/]
    ]
    for (const [params, message] of bad) {
      const parsed = Filters.parse(params)
      expect(Result.isFailure(parsed), JSON.stringify(params).slice(0, 60)).toBe(true)
      expect(Result.isFailure(parsed) ? parsed.failure : "").toMatch(message)
    }
    expect(Filters.parse({ id: "", key: " ", state: "", after: "" })).toEqual(Result.succeed({}))
    expect(Filters.parse({ after: "2026-12-05", before: "2026-12-05T10:30+02:00" })).toEqual(
      Result.succeed({ after: new Date("2026-12-05T00:00:00Z"), before: new Date("2026-12-05T08:30:00Z") })
    )
  })
})

describe("pager text", () => {
  it("says where the page is, and the truth past the end", () => {
    expect(pagerText(1, 25, 0)).toBe("no jobs")
    expect(pagerText(1, 5, 18)).toBe("1–5 of 18 · page 1 of 4")
    expect(pagerText(4, 5, 18)).toBe("16–18 of 18 · page 4 of 4")
    expect(pagerText(999, 5, 11)).toBe("page 999 of 3 — no jobs on this page")
  })
})

describe("times", () => {
  it("relative times round down to the largest unit, both ways", () => {
    const now = new Date("2026-12-05T12:00:00Z")
    const at = (ms: number) => Time.relative(new Date(now.getTime() - ms), now)
    expect(at(1000)).toBe("just now")
    expect(at(12_000)).toBe("12 s ago")
    expect(at(3 * 60_000 + 40_000)).toBe("3 min ago")
    expect(at(2 * 3_600_000 + 5 * 60_000)).toBe("2 h ago")
    expect(at(4 * 86_400_000 + 3_600_000)).toBe("4 d ago")
    expect(at(-10 * 60_000)).toBe("in 10 min")
    expect(Time.duration(850)).toBe("850 ms")
    expect(Time.duration(65_000)).toBe("1 min 5 s")
    expect(Time.duration(86_400_000 * 3 + 3_600_000 * 4)).toBe("3 d 4 h")
  })

  it("durations of a job are read from its trail: queued until the first claim, the latest attempt, the total", () => {
    const t = (s: number) => new Date(Date.UTC(2026, 11, 5, 12, 0, s))
    const job = (state: JobState, updated: number) =>
      new Job({
        id: "j",
        type: "T",
        handler: null,
        payload: {},
        state,
        scheduleTime: t(0),
        metadata: {},
        attempt: 2,
        createdAt: t(0),
        updatedAt: t(updated),
        lockedBy: null,
        leaseUntil: null,
        priority: 0
      })
    const log = (s: number, kind: JobLog["kind"]): JobLog => ({ jobId: "j", at: t(s), kind, message: "" })
    const logs = [log(0, "Enqueued"), log(4, "Processing"), log(6, "Requeued"), log(10, "Processing"), log(13, "Succeeded")]
    expect(Time.durations({ job: job("Succeeded", 13), logs }, t(60))).toEqual({ queued: 4000, running: 3000, total: 13_000 })
    expect(Time.durations({ job: job("Processing", 10), logs: logs.slice(0, 4) }, t(20))).toEqual({ queued: 4000, running: 10_000, total: 20_000 })
    expect(Time.durations({ job: job("Enqueued", 0), logs: logs.slice(0, 1) }, t(30))).toEqual({ queued: 30_000, running: undefined, total: 30_000 })
  })
})
