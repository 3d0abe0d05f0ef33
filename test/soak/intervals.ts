/**
 * The overlap checker: from the recorded handler intervals, how many handlers of a key were inside
 * at every instant.
 *
 * Times are PostgreSQL `clock_timestamp()` values in microseconds. An interval's end is its recorded
 * exit; a handler of a killed process has none, and ends at the process's death time (taken by the
 * harness just before it sends SIGKILL: the handler cannot run after the process is gone, and the
 * process's locks are freed only after that). At equal instants, entries are counted before exits
 * (the conservative order).
 *
 * Lost slots. When the harness terminates a process's backend connections, PostgreSQL frees the
 * advisory locks of those connections, while the handlers holding them keep running until the slot's
 * watchdog notices (`slot.lost`, every ping interval). A termination is a window `[from, at]`: `from`
 * is taken before the victims are read, `at` once every victim backend is gone (the terminations are
 * signalled together, so the window is a few milliseconds). A handler of the terminated process that
 * was inside at `from` holds a lock of a victim backend, which the harness read between the two
 * instants: if its key is among them, it stops holding at `from` (its lock may be freed from then on).
 * A handler of that process entering after `from` whose attempt was claimed before `at` may have taken
 * its slot on a victim backend after that read, just before the backend died: it counts as not holding
 * (the only leniency: attempts claimed before the fault ended). The checker
 * therefore counts two figures per instant — every handler inside (`inside`), and the handlers whose
 * lock is still held (`holding`). A *violation* is `holding > limit`: the provider handed out more slots
 * than exist. A *lost-slot overlap* is `inside > limit` with `holding <= limit`: the window between a
 * lock's loss and its holder noticing. Both are reported.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/** One recorded handler run. */
export interface Interval {
  readonly jobId: string
  readonly attempt: number
  readonly key: string | null
  readonly limit: number | null
  readonly proc: string
  readonly pid: number
  readonly claimedAt: number
  readonly entered: number
  /** Recorded exit, else the death of its process, else the next audit entry of its job. */
  readonly exited: number
  readonly exitSource: "recorded" | "death" | "audit" | "open"
  readonly result: string | null
}

/** A connection termination injected by a harness. */
export interface Termination {
  readonly pid: number
  /** Before the victim backends were read and signalled (default: `at`). */
  readonly from?: number
  /** Every victim backend gone (its locks free). */
  readonly at: number
  /** Keys the terminated process held an advisory lock of, read between `from` and the signals. */
  readonly keys: ReadonlyArray<string>
}

/** The figures of one key. */
export interface KeyReport {
  readonly key: string
  readonly limit: number
  readonly intervals: number
  /** Most handlers inside at once. */
  readonly maxInside: number
  /** Most handlers inside at once whose lock was still held. */
  readonly maxHolding: number
  /** Episodes of `holding > limit`. */
  readonly violations: number
  /** Episodes of `inside > limit` explained by lost slots. */
  readonly lostSlotOverlaps: number
  /** Examples, for diagnosis. */
  readonly examples: ReadonlyArray<string>
  /** The first violation episodes: when, and who was inside. */
  readonly episodes: ReadonlyArray<{ readonly at: number; readonly inside: ReadonlyArray<Interval> }>
}

const µs = (expr: string) => `(extract(epoch from ${expr}) * 1000000)::bigint::text`

/** Loads every interval; `open` intervals (no exit, no death, no later audit entry) end at +infinity. */
export const loadIntervals = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql.unsafe<any>(`
    SELECT i.job_id, i.attempt, i.key, i.lim, i.proc, i.pid, i.result,
           ${µs("i.claimed_at")} AS claimed_at, ${µs("i.entered")} AS entered,
           ${µs("i.exited")} AS exited, ${µs("d.at")} AS died,
           ${µs("(SELECT min(l.at) FROM warp_job_logs l WHERE l.job_id = i.job_id AND l.at > i.entered)")} AS next_log
    FROM rel_intervals i LEFT JOIN rel_deaths d ON d.pid = i.pid AND d.proc = i.proc`)
  return rows.map((r): Interval => {
    const source = r.exited !== null ? "recorded" : r.died !== null ? "death" : r.next_log !== null ? "audit" : "open"
    const exited = r.exited ?? r.died ?? r.next_log
    return {
      jobId: r.job_id,
      attempt: Number(r.attempt),
      key: r.key,
      limit: r.lim === null ? null : Number(r.lim),
      proc: r.proc,
      pid: Number(r.pid),
      claimedAt: Number(r.claimed_at),
      entered: Number(r.entered),
      exited: exited === null ? Number.POSITIVE_INFINITY : Number(exited),
      exitSource: source,
      result: r.result
    }
  })
})

/** Loads the connection terminations a harness recorded. */
export const loadTerminations = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql.unsafe<any>(`SELECT pid, ${µs("coalesce(started, at)")} AS started, ${µs("at")} AS at, locks FROM rel_faults WHERE kind = 'terminate'`)
  return rows.map((r): Termination => ({ pid: Number(r.pid), from: Number(r.started), at: Number(r.at), keys: r.locks ?? [] }))
})

/**
 * When an interval's lock was lost (the earliest termination of its process that affects it), if ever:
 * inside at a termination's `from` with its key among the victims' locks — lost at `from`; entering
 * after `from` with a claim from before the window's end — lost at its entry, so it never counts as
 * holding: its slot may have been taken on a victim backend after the victims' locks were read and
 * before that backend died (a claim after the window's end takes its slot on a backend that lives).
 */
const lostAt = (i: Interval, terminations: ReadonlyArray<Termination>): number | undefined => {
  let first: number | undefined
  for (const t of terminations) {
    if (t.pid !== i.pid || i.key === null) continue
    const from = t.from ?? t.at
    const lost =
      i.claimedAt < from && i.entered <= from && from < i.exited && t.keys.includes(i.key)
        ? from
        : from < i.entered && i.claimedAt < t.at
          ? i.entered
          : undefined
    if (lost !== undefined && (first === undefined || lost < first)) first = lost
  }
  return first
}

const fmt = (t: number) => new Date(Math.floor(t / 1000)).toISOString()

/** Sweeps the intervals of every key; keyless intervals are ignored. */
export const checkOverlaps = (intervals: ReadonlyArray<Interval>, terminations: ReadonlyArray<Termination> = []): ReadonlyArray<KeyReport> => {
  const byKey = new Map<string, Array<Interval>>()
  for (const i of intervals) {
    if (i.key === null) continue
    const list = byKey.get(i.key) ?? []
    list.push(i)
    byKey.set(i.key, list)
  }
  const reports: Array<KeyReport> = []
  for (const [key, list] of byKey) {
    // the strictest limit recorded for the key
    const limit = Math.min(...list.map((i) => i.limit ?? 1))
    // kinds: 0 = enter, 1 = lock lost (stays inside, stops holding), 2 = exit; at equal times enter first
    const events: Array<{ t: number; kind: 0 | 1 | 2; holding: boolean; i: Interval }> = []
    for (const i of list) {
      const lost = lostAt(i, terminations)
      const lostBeforeEnter = lost !== undefined && lost <= i.entered
      events.push({ t: i.entered, kind: 0, holding: !lostBeforeEnter, i })
      if (lost !== undefined && !lostBeforeEnter) events.push({ t: lost, kind: 1, holding: true, i })
      events.push({ t: i.exited, kind: 2, holding: lost === undefined, i })
    }
    events.sort((a, b) => a.t - b.t || a.kind - b.kind)
    let inside = 0
    let holding = 0
    let maxInside = 0
    let maxHolding = 0
    let violations = 0
    let lostSlotOverlaps = 0
    let inViolation = false
    let inOverlap = false
    const live = new Set<Interval>()
    const examples: Array<string> = []
    const episodes: Array<{ at: number; inside: ReadonlyArray<Interval> }> = []
    for (const e of events) {
      if (e.kind === 0) {
        inside++
        if (e.holding) holding++
        live.add(e.i)
      } else if (e.kind === 1) {
        holding--
      } else {
        inside--
        if (e.holding) holding--
        live.delete(e.i)
      }
      maxInside = Math.max(maxInside, inside)
      maxHolding = Math.max(maxHolding, holding)
      const violating = holding > limit
      const overlapping = inside > limit && !violating
      if (violating && !inViolation) {
        violations++
        if (episodes.length < 5) episodes.push({ at: e.t, inside: [...live] })
        if (examples.length < 5) {
          examples.push(
            `violation on '${key}' (limit ${limit}) at ${fmt(e.t)}: ` +
              [...live].map((i) => `${i.jobId}#${i.attempt}@${i.proc} [${fmt(i.entered)} .. ${fmt(i.exited)} ${i.exitSource}]`).join(", ")
          )
        }
      }
      if (overlapping && !inOverlap) lostSlotOverlaps++
      inViolation = violating
      inOverlap = overlapping
    }
    reports.push({ key, limit, intervals: list.length, maxInside, maxHolding, violations, lostSlotOverlaps, examples, episodes })
  }
  return reports.sort((a, b) => (a.key < b.key ? -1 : 1))
}

/** Totals over every key. */
export const summarize = (reports: ReadonlyArray<KeyReport>) => ({
  keys: reports.length,
  intervals: reports.reduce((n, r) => n + r.intervals, 0),
  violations: reports.reduce((n, r) => n + r.violations, 0),
  lostSlotOverlaps: reports.reduce((n, r) => n + r.lostSlotOverlaps, 0),
  examples: reports.flatMap((r) => r.examples).slice(0, 10)
})
