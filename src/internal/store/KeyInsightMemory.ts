/**
 * The key views of the in-memory store: straight scans of its maps (correctness over speed).
 *
 * @since 0.3.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { Job, JobLog } from "../job/Job.js"
import { isWindow } from "./JobStore.js"
import {
  type KeyHolder,
  type KeyInsightService,
  keyOfMetadata,
  type KeySummary,
  limitOfMetadata,
  maxHolders,
  windows,
  type WindowCounts,
  type WindowName
} from "./KeyInsight.js"

/**
 * One event of a pruned keyed job that the per-key figures count (it ended Succeeded or Deleted, or
 * was requeued, at `at`): the store keeps them for a day after the job's rows go (see `Retention`).
 */
export interface KeyHistoryEntry {
  readonly key: string
  readonly at: Date
  readonly kind: "Succeeded" | "Deleted" | "Requeued"
}

/** What the views read from the memory store. */
export interface MemoryState {
  readonly jobs: ReadonlyMap<string, Job>
  readonly logs: ReadonlyMap<string, ReadonlyArray<JobLog>>
  /** The time a job created Scheduled was created for (absent: created Enqueued). */
  readonly originFor: ReadonlyMap<string, Date>
  /** The per-key figures of pruned keyed jobs (counted with the rows'). */
  readonly history?: ReadonlyArray<KeyHistoryEntry> | undefined
  /** The workers' last reports: running jobs whose row does not carry their key yet, by key. */
  readonly reported: () => ReadonlyArray<{
    readonly workerId: string
    readonly slots: ReadonlyArray<{ readonly key: string; readonly jobs?: ReadonlyArray<{ readonly id: string }> | undefined }>
  }>
}

const live = (j: Job) => j.state === "Scheduled" || j.state === "Enqueued" || j.state === "Processing"
const pending = (j: Job) => j.state === "Scheduled" || j.state === "Enqueued"
const byKey = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

/** Builds the views over a memory store's state. */
export const make = (state: MemoryState): KeyInsightService => {
  /** Running jobs reported holding `key` whose row does not carry it yet (see `WorkerReport.slots`). */
  const reportedFor = (key: string): Array<Job> =>
    state.reported().flatMap((w) =>
      w.slots
        .filter((s) => s.key === key)
        .flatMap((s) => s.jobs ?? [])
        .map((reported) => state.jobs.get(reported.id))
        .filter((j): j is Job => j !== undefined && j.state === "Processing" && j.lockedBy === w.workerId && keyOfMetadata(j.metadata) === undefined)
    )
  const reportedKeys = (): Array<string> =>
    state.reported().flatMap((w) => w.slots.filter((s) => (s.jobs ?? []).length > 0).map((s) => s.key)).filter((k) => reportedFor(k).length > 0)
  const summarize = (key: string, adminSlots: number | null, now: number): KeySummary => {
    const rows = [...state.jobs.values()].filter((j) => keyOfMetadata(j.metadata) === key)
    const liveRows = rows.filter(live)
    const due = liveRows.filter((j) => pending(j) && j.scheduleTime.getTime() <= now)
    const since = due.length === 0
      ? null
      : new Date(Math.min(...due.map((j) => Math.max(j.createdAt.getTime(), state.originFor.get(j.id)?.getTime() ?? 0))))
    const limits = liveRows.map((j) => limitOfMetadata(j.metadata))
    const holders: Array<KeyHolder> = [...liveRows.filter((j) => j.state === "Processing"), ...reportedFor(key)]
      .sort((a, b) => a.updatedAt.getTime() - b.updatedAt.getTime() || byKey(a.id, b.id))
      .map((j) => ({ id: j.id, type: j.type, workerId: j.lockedBy, since: j.updatedAt }))
    const counts = {} as Record<WindowName, WindowCounts>
    for (const w of windows) {
      const from = now - w.seconds * 1000
      let requeued = 0
      for (const j of rows) {
        for (const l of state.logs.get(j.id) ?? []) if (l.kind === "Requeued" && l.at.getTime() >= from) requeued++
      }
      const pruned = (kind: KeyHistoryEntry["kind"]) =>
        (state.history ?? []).filter((e) => e.key === key && e.kind === kind && e.at.getTime() >= from).length
      const ended = (s: "Succeeded" | "Deleted") => rows.filter((j) => j.state === s && j.updatedAt.getTime() >= from).length + pruned(s)
      counts[w.name] = { requeued: requeued + pruned("Requeued"), succeeded: ended("Succeeded"), deleted: ended("Deleted") }
    }
    return {
      key,
      running: holders.length,
      waiting: due.length,
      waitingSince: since,
      declared: limits.length === 0 ? null : { min: Math.min(...limits), max: Math.max(...limits) },
      adminSlots,
      pressure: since === null ? 0 : due.length * Math.max(0, (now - since.getTime()) / 1000),
      holders: holders.slice(0, maxHolders),
      windows: counts
    }
  }

  return {
    liveKeys: ({ limit, offset, overrides }) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const admin = new Map(overrides.map((o) => [o.key, o.slots]))
        const keys = new Set(admin.keys())
        for (const j of state.jobs.values()) {
          const k = keyOfMetadata(j.metadata)
          if (k !== undefined && live(j)) keys.add(k)
        }
        for (const k of reportedKeys()) keys.add(k)
        const all = [...keys]
          .map((k) => summarize(k, admin.get(k) ?? null, now))
          .sort((a, b) => b.pressure - a.pressure || byKey(a.key, b.key))
        return { rows: isWindow(limit, offset) ? all.slice(offset, offset + limit) : [], total: all.length }
      }),
    line: (key, { id, override }) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const me = state.jobs.get(id)
        const t = me?.scheduleTime.getTime() ?? Number.NEGATIVE_INFINITY
        let ahead = 0
        for (const j of state.jobs.values()) {
          if (!pending(j) || keyOfMetadata(j.metadata) !== key) continue
          const s = j.scheduleTime.getTime()
          if (s < t || (s === t && j.id < id)) ahead++
        }
        return { summary: summarize(key, override, now), ahead }
      })
  }
}
