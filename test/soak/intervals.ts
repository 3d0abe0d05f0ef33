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
 * its slot on a victim backend after that read, just before the backend died: it counts as not holding.
 * The checker counts two figures per instant — every handler inside (`inside`), and the handlers whose
 * lock is still held (`holding`). A *violation* is any instant with `inside > limit`, whatever the
 * fault: no leniency (the provider's lock-delay keeps a lost slot from being granted again until its
 * holder has stopped). For diagnosis, a violation episode with `holding <= limit` throughout is also
 * counted as `afterLostSlot`: more handlers inside than slots, but only because a lock was lost while
 * its handler still ran (the window the lock-delay closes).
 */
import * as SqlClient from "effect/sql/SqlClient"
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
  /** Episodes of `inside > limit`. */
  readonly violations: number
  /** Of the violations, episodes with `holding <= limit` throughout (a lock lost while its handler ran). */
  readonly afterLostSlot: number
  /**
   * Not violations: episodes of `inside > limit` that never have more than `limit` inside once the runs
   * recorded as lapsed (see {@link Lapse}) are left out from their lapse on.
   */
  readonly overlapsOfLapsedRuns: number
  /** Examples, for diagnosis. */
  readonly examples: ReadonlyArray<string>
  /** Examples of overlaps of lapsed runs, for diagnosis. */
  readonly lapsedExamples: ReadonlyArray<string>
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

/**
 * A run taken out of the count by a pause its holder cannot see: its process was stopped (SIGSTOP)
 * past the provider's deadline while it ran, and the run was recorded as lapsed (requeued with the
 * lapse text, never as its handler's outcome). From `at` (the pause's start, or the run's entry if
 * later) the slot is no longer its holder's: the provider may grant it again while the process sleeps
 * (the deadline is the longest pause that never over-admits). Which runs qualify is the harness's call
 * (from the recorded outcomes); the checker only counts them apart.
 */
export interface Lapse {
  readonly jobId: string
  readonly attempt: number
  readonly at: number
}

const runId = (i: { readonly jobId: string; readonly attempt: number }) => `${i.jobId}#${i.attempt}`

/**
 * Sweeps the intervals of every key; keyless intervals are ignored. `lapses`: runs recorded as lapsed
 * under a pause past the deadline; an instant with more runs inside than the limit, but not more once
 * those runs are left out from their lapse on, is counted as `overlapsOfLapsedRuns` (diagnosis), not as
 * a violation. Every other instant over the limit is a violation.
 */
export const checkOverlaps = (
  intervals: ReadonlyArray<Interval>,
  terminations: ReadonlyArray<Termination> = [],
  lapses: ReadonlyArray<Lapse> = []
): ReadonlyArray<KeyReport> => {
  const lapsedAt = new Map(lapses.map((l) => [runId(l), l.at]))
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
    // kinds: 0 = enter, 1 = lock lost (stays inside, stops holding), 2 = lapsed (stays inside, leaves the
    // count), 3 = exit; at equal times enter first
    // a run lost or lapsed at its entry already enters neither holding nor (lapsed) counted
    const events: Array<{ t: number; kind: 0 | 1 | 2 | 3; i: Interval; holds: boolean; counts: boolean }> = []
    for (const i0 of list) {
      // a run whose end precedes its entry ends at its entry: its process's death time is read before the
      // SIGKILL, and on a loaded machine an entry sent just before the signal lands after that read (an
      // exit sorted before its entry would leave the run inside for good)
      const i = i0.exited < i0.entered ? { ...i0, exited: i0.entered } : i0
      const lost = lostAt(i, terminations)
      const lapse = lapsedAt.get(runId(i))
      const counts = lapse === undefined || lapse > i.entered
      const holds = counts && (lost === undefined || lost > i.entered)
      events.push({ t: i.entered, kind: 0, i, holds, counts })
      if (lost !== undefined && lost > i.entered) events.push({ t: lost, kind: 1, i, holds, counts })
      if (lapse !== undefined && lapse > i.entered) events.push({ t: lapse, kind: 2, i, holds, counts })
      events.push({ t: i.exited, kind: 3, i, holds, counts })
    }
    events.sort((a, b) => a.t - b.t || a.kind - b.kind)
    // inside: every run inside; counted: inside, less lapsed runs (what a violation is counted on);
    // holding: counted, less runs whose lock was lost (diagnosis of a violation)
    let inside = 0
    let counted = 0
    let holding = 0
    let maxInside = 0
    let maxHolding = 0
    let violations = 0
    let afterLostSlot = 0
    let overlapsOfLapsedRuns = 0
    let inViolation = false
    let episodeHeld = false
    let inOverlap = false
    let overlapCounted = false
    const state = new Map<Interval, { counted: boolean; holding: boolean }>()
    const live = new Set<Interval>()
    const examples: Array<string> = []
    const lapsedExamples: Array<string> = []
    const episodes: Array<{ at: number; inside: ReadonlyArray<Interval> }> = []
    const describe = (what: string, t: number) =>
      `${what} on '${key}' (limit ${limit}) at ${fmt(t)}: ` +
      [...live].map((i) => `${runId(i)}@${i.proc}${lapsedAt.has(runId(i)) ? " (lapsed)" : ""} [${fmt(i.entered)} .. ${fmt(i.exited)} ${i.exitSource}]`).join(", ")
    for (const e of events) {
      if (e.kind === 0) {
        inside++
        if (e.counts) counted++
        if (e.holds) holding++
        state.set(e.i, { counted: e.counts, holding: e.holds })
        live.add(e.i)
      } else if (e.kind === 1 || e.kind === 2) {
        const st = state.get(e.i)
        if (st === undefined) continue
        if (st.holding) {
          holding--
          st.holding = false
        }
        if (e.kind === 2 && st.counted) {
          counted--
          st.counted = false
        }
      } else {
        const st = state.get(e.i)
        inside--
        if (st?.counted) counted--
        if (st?.holding) holding--
        state.delete(e.i)
        live.delete(e.i)
      }
      maxInside = Math.max(maxInside, inside)
      maxHolding = Math.max(maxHolding, holding)
      const violating = counted > limit
      if (violating && !inViolation) {
        violations++
        episodeHeld = false
        if (episodes.length < 5) episodes.push({ at: e.t, inside: [...live] })
        if (examples.length < 5) examples.push(describe("violation", e.t))
      }
      if (violating && holding > limit) episodeHeld = true
      // an episode ends: counted after a lost slot if no instant of it had more holders than slots
      if (inViolation && !violating && !episodeHeld) afterLostSlot++
      inViolation = violating
      // more inside than the limit: an overlap; one that never had more counted runs than the limit
      // involves only lapsed runs beyond it
      const over = inside > limit
      if (over && !inOverlap) {
        overlapCounted = false
        if (lapsedExamples.length < 5 && !violating) lapsedExamples.push(describe("overlap of lapsed runs", e.t))
      }
      if (over && violating) overlapCounted = true
      if (inOverlap && !over && !overlapCounted) overlapsOfLapsedRuns++
      inOverlap = over
    }
    if (inViolation && !episodeHeld) afterLostSlot++
    if (inOverlap && !overlapCounted) overlapsOfLapsedRuns++
    reports.push({ key, limit, intervals: list.length, maxInside, maxHolding, violations, afterLostSlot, overlapsOfLapsedRuns, examples, lapsedExamples, episodes })
  }
  return reports.sort((a, b) => (a.key < b.key ? -1 : 1))
}

/**
 * The runs of a group's keys as holders of the group: each interval of a key in `keys` becomes one of
 * `group` at limit `total` (the group's slot is held in the same attempt scope as the key's, so the run
 * lies inside both), for {@link checkOverlaps}. A termination's `keys` must name the group for its
 * diagnosis (`afterLostSlot`; a harness maps the group's slot locks to the group's name).
 */
export const asGroup = (intervals: ReadonlyArray<Interval>, keys: ReadonlySet<string>, group: string, total: number): Array<Interval> =>
  intervals.filter((i) => i.key !== null && keys.has(i.key)).map((i) => ({ ...i, key: group, limit: total }))

/** Totals over every key. */
export const summarize = (reports: ReadonlyArray<KeyReport>) => ({
  keys: reports.length,
  intervals: reports.reduce((n, r) => n + r.intervals, 0),
  violations: reports.reduce((n, r) => n + r.violations, 0),
  afterLostSlot: reports.reduce((n, r) => n + r.afterLostSlot, 0),
  overlapsOfLapsedRuns: reports.reduce((n, r) => n + r.overlapsOfLapsedRuns, 0),
  lapsedExamples: reports.flatMap((r) => r.lapsedExamples).slice(0, 10),
  examples: reports.flatMap((r) => r.examples).slice(0, 10)
})
