/**
 * The in-memory job store: one process, same contract as the PostgreSQL store. Every operation runs
 * as one synchronous step, so concurrent fibers never observe a half-applied write. Time comes from
 * Effect's `Clock`, so tests can drive it with `TestClock`. Fifo-mode rows are claimed by the same rule
 * as in the PostgreSQL store (see `JobStoreService.fetch`). Wake-up hints (`JobStoreService.wakeups`) go
 * to the workers through an in-process `PubSub`, sent as the PostgreSQL store sends them.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Stream from "effect/Stream"
import { Job, type JobLog, type NewJob, type NewJobKey } from "../job/Job.js"
import { originText } from "../job/Priority.js"
import { groupKeyed, outcomesOf } from "./JobKeys.js"
import { counterOf, logOf, stateOf } from "../job/Outcome.js"
import { FOREVER_MS, HISTORY_MS, historyBucket, JobExpired, type PruneResult, type RetentionPlan, type TerminalState, planFor, terminal } from "../job/Retention.js"
import {
  type AdmissionOverrides,
  admit,
  byClaim,
  bySubmission,
  type CancelResult,
  cancelText,
  operatorCause,
  replacedCause,
  claimOrder,
  concurrencyKeyOf,
  counterKeys,
  deduplicatedCounter,
  emptyCounts,
  holdsKey,
  joinedByKeyText,
  joinedThrottleText,
  replacedByKeyText,
  replacedCounter,
  type Submitted,
  fairMerge,
  fairOf,
  fairTagOf,
  fifoPolicyOf,
  isWindow,
  JobStore,
  type JobStoreService,
  matchesFilter,
  operatorFrom,
  operatorTo,
  type SlotAuditFinding,
  type WorkerInfo,
  type WorkerReport,
  retagsOn
} from "./JobStore.js"
import * as SemaphoreProviderMemory from "../semaphore/SemaphoreProviderMemory.js"
import * as KeyInsightMemory from "./KeyInsightMemory.js"
import type { KeyHistoryEntry } from "./KeyInsightMemory.js"
import { StoreError } from "./StoreError.js"
import * as Wakeup from "./Wakeup.js"

const clone = (j: Job, patch: Partial<ConstructorParameters<typeof Job>[0]>): Job => new Job({ ...j, ...patch })

/** Builds an empty in-memory store. */
export const make = Effect.flatMap(Effect.zip(SemaphoreProviderMemory.make, PubSub.unbounded<Wakeup.Wakeup>()), ([locks, hub]) => Effect.sync(() => {
  const jobs = new Map<string, Job>()
  const logs = new Map<string, Array<JobLog>>()
  const counters = new Map<string, number>()
  const workers = new Map<string, { report: WorkerReport; startedAt: Date; seenAt: Date }>()
  let slotAudit: ReadonlyArray<SlotAuditFinding> = []
  /** Jobs marked as holding a slot of a `CancelRunning` key (see `markHolder`), cleared by their finalize. */
  const holders = new Map<string, string>()
  /** The admin overrides the claim's admission reads, once the in-memory limits handed them over (see `admit`). */
  let overrides: AdmissionOverrides | undefined
  const originFor = new Map<string, Date>()
  /** Pruned jobs, by id (see `prune`). */
  const tombstones = new Map<string, { readonly type: string; readonly state: TerminalState; readonly finishedAt: Date; readonly prunedAt: Date }>()
  /** The per-key figures of pruned keyed jobs of the last day (see `KeyInsightMemory.MemoryState.history`). */
  const history: Array<KeyHistoryEntry> = []
  /** Job keys: the row that last took each (type, key) (it holds it while `holdsKey` says so), and each keyed row's hold. */
  const keyHolders = new Map<string, string>()
  const keyHolds = new Map<string, { readonly hold: NewJobKey["hold"]; readonly until: number | undefined; readonly windowMs: number | undefined }>()

  /**
   * The rows expired under `plan` at `at`, oldest first: per (type, state), those ended before the later
   * of `at - maxAge` and the finish time of the maxCount-th newest row (as the PostgreSQL store reads it).
   */
  const expiredAt = (plan: RetentionPlan, at: number): Array<Job> => {
    const groups = new Map<string, Array<Job>>()
    for (const j of jobs.values()) {
      if (!(terminal as ReadonlyArray<string>).includes(j.state)) continue
      const k = `${j.type}\u0000${j.state}`
      const g = groups.get(k)
      if (g === undefined) groups.set(k, [j])
      else g.push(j)
    }
    const out: Array<Job> = []
    for (const rows of groups.values()) {
      const { maxAgeMs, maxCount } = planFor(plan, rows[0]!.type, rows[0]!.state as TerminalState)
      const newest = [...rows].sort((a, b) => b.updatedAt.getTime() - a.updatedAt.getTime())
      const byAge = maxAgeMs === null ? -Infinity : at - maxAgeMs
      const byCount = maxCount === null ? -Infinity : maxCount === 0 ? Infinity : (newest[maxCount - 1]?.updatedAt.getTime() ?? -Infinity)
      const cutoff = Math.max(byAge, byCount)
      for (const j of rows) if (j.updatedAt.getTime() < cutoff) out.push(j)
    }
    return out.sort((a, b) => a.updatedAt.getTime() - b.updatedAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  }

  const log = (jobId: string, at: Date, kind: JobLog["kind"], message: string) => {
    const list = logs.get(jobId) ?? []
    list.push({ jobId, at, kind, message })
    logs.set(jobId, list)
  }

  const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

  /** Adds 1 to `counter` and to its per-type counter. */
  const bump = (counter: string, type: string) => {
    for (const k of counterKeys(counter, type)) counters.set(k, (counters.get(k) ?? 0) + 1)
  }

  /**
   * The ids of the Fifo-mode rows that may be claimed next at `at`: per key, walking the rows in line in
   * submission order, the first due pending row with fewer than its limit Processing or pending ahead.
   */
  const fifoClaimable = (at: Date): ReadonlySet<string> => {
    const lines = new Map<string, Array<Job>>()
    for (const j of jobs.values()) {
      const key = fifoPolicyOf(j)?.key
      if (key === undefined) continue
      const pending = j.state === "Enqueued" || j.state === "Scheduled"
      if (j.state === "Processing" || (pending && (j.attempt > 0 || j.scheduleTime.getTime() <= at.getTime()))) {
        const line = lines.get(key)
        if (line === undefined) lines.set(key, [j])
        else line.push(j)
      }
    }
    const out = new Set<string>()
    for (const line of lines.values()) {
      const running = line.filter((j) => j.state === "Processing").length
      let ahead = 0
      for (const j of line.sort(bySubmission)) {
        if (j.state === "Processing") continue
        if (j.scheduleTime.getTime() <= at.getTime() && ahead + running < fifoPolicyOf(j)!.limit) {
          out.add(j.id)
          break
        }
        ahead++
      }
    }
    return out
  }

  /** The virtual time of fair-share tagging at `at` (see `fairTagOf`). */
  const virtualTime = (at: Date): number => {
    let due: number | undefined
    let running: number | undefined
    for (const j of jobs.values()) {
      if (j.fairTag === undefined) continue
      if ((j.state === "Enqueued" || j.state === "Scheduled") && j.scheduleTime.getTime() <= at.getTime()) {
        if (due === undefined || j.fairTag < due) due = j.fairTag
      } else if (j.state === "Processing" && (running === undefined || j.fairTag > running)) running = j.fairTag
    }
    return due ?? running ?? 0
  }

  /** The last (largest) tag among the pending rows of fair-share flow `flow`. */
  const lastTag = (flow: string): number | undefined => {
    let last: number | undefined
    for (const j of jobs.values()) {
      if (j.fairTag === undefined || (j.state !== "Enqueued" && j.state !== "Scheduled") || fairOf(j.metadata)?.flow !== flow) continue
      if (last === undefined || j.fairTag > last) last = j.fairTag
    }
    return last
  }

  const service: JobStoreService = {
    insert: (rows) =>
      Effect.flatMap(now, (at) =>
        Effect.suspend(() => {
          for (const r of rows) {
            if (jobs.has(r.id)) return Effect.fail(new StoreError({ operation: "insert", cause: new Error(`duplicate id ${r.id}`) }))
          }
          const results: Array<Submitted> = rows.map((r) => ({ _tag: "Created", id: r.id }))
          // keyed rows: one effective row per (type, key), against the live holder if any (see `JobKeys`)
          const written: Array<NewJob> = []
          const keyed = rows.some((r) => r.jobKey !== undefined)
          if (keyed) {
            for (const g of groupKeyed(rows)) {
              const slot = `${g.row.type}\u0000${g.row.jobKey.key}`
              const heldBy = keyHolders.get(slot)
              const holder = heldBy === undefined ? undefined : jobs.get(heldBy)
              const hold = heldBy === undefined ? undefined : keyHolds.get(heldBy)
              const live = holder !== undefined && hold !== undefined && holdsKey(holder.state, hold.hold, hold.until, at.getTime())
              if (!live) {
                written.push(g.row)
                keyHolders.set(slot, g.row.id)
                keyHolds.set(g.row.id, {
                  hold: g.row.jobKey.hold,
                  until: g.row.jobKey.hold === "Throttle" ? at.getTime() + (g.row.jobKey.windowMs ?? 0) : undefined,
                  windowMs: g.row.jobKey.windowMs
                })
              }
              const id = live ? holder.id : g.row.id
              const replaceable = live && (holder.state === "Enqueued" || holder.state === "Scheduled")
              const outcomes = outcomesOf(g, id, !live, replaceable)
              g.indexes.forEach((index, i) => (results[index] = outcomes[i]!))
              if (replaceable && g.mode !== "keep") {
                jobs.set(
                  id,
                  clone(holder, {
                    payload: structuredClone(g.row.payload),
                    updatedAt: at,
                    ...(g.mode === "replace" ? { state: g.row.state, scheduleTime: g.row.scheduleTime, priority: g.row.priority ?? 0 } : {})
                  })
                )
              }
              // the holder's trail: one entry per row of the group that did not create it
              const key = g.row.jobKey.key
              const throttled = (live ? hold!.hold : g.row.jobKey.hold) === "Throttle"
              const windowMs = (live ? hold!.windowMs : g.row.jobKey.windowMs) ?? 0
              for (const o of outcomes) {
                if (o._tag === "Created") continue
                const replaced = o._tag === "Replaced"
                log(id, at, replaced ? "Replaced" : "Joined", replaced ? replacedByKeyText(key) : throttled ? joinedThrottleText(windowMs, key) : joinedByKeyText(key))
                bump(replaced ? replacedCounter : deduplicatedCounter, g.row.type)
              }
            }
          }
          const virtual = virtualTime(at)
          const last = new Map<string, number | undefined>()
          for (const r of keyed ? rows.filter((r) => r.jobKey === undefined).concat(written) : rows) {
            const fair = fairOf(r.metadata)
            let fairTag: number | undefined
            if (fair !== undefined) {
              fairTag = fairTagOf(virtual, last.has(fair.flow) ? last.get(fair.flow) : lastTag(fair.flow), fair.weight)
              last.set(fair.flow, fairTag)
            }
            jobs.set(
              r.id,
              new Job({
                id: r.id,
                type: r.type,
                handler: r.handler,
                payload: structuredClone(r.payload),
                state: r.state,
                scheduleTime: r.scheduleTime,
                metadata: structuredClone(r.metadata),
                attempt: 0,
                createdAt: at,
                updatedAt: at,
                lockedBy: null,
                leaseUntil: null,
                ...(fairTag === undefined ? {} : { fairTag }),
                priority: r.priority ?? 0,
                ...(r.jobKey === undefined ? {} : { jobKey: r.jobKey.key })
              })
            )
            if (r.state === "Scheduled") originFor.set(r.id, r.scheduleTime)
            // the creation entry first in its trail (a row created by a group may have entries of the group's later rows)
            const list = logs.get(r.id) ?? []
            list.unshift({ jobId: r.id, at, kind: r.state, message: originText(r.state === "Scheduled" ? `Scheduled for ${r.scheduleTime.toISOString()}` : "Enqueued", r.priority ?? 0) })
            logs.set(r.id, list)
          }
          // one hint per insert, as the PostgreSQL store's one notification per statement
          const { due, earliest, priority } = Wakeup.insertSummary(rows, at.getTime())
          if (due > 0) PubSub.publishUnsafe(hub, Wakeup.due(due, priority))
          if (earliest !== undefined) PubSub.publishUnsafe(hub, { _tag: "Future", inMs: earliest - at.getTime() })
          return Effect.succeed(results)
        })
      ),

    admissionOverrides: (read) => {
      overrides = read
    },

    fetch: (workerId, limit, lease) =>
      Effect.map(now, (at) => {
        // at most one Fifo row: of the keys' next claimable rows, the one of the highest priority due first
        const fifo = [...fifoClaimable(at)].map((id) => jobs.get(id)!).sort(byClaim).slice(0, 1)
        const pendingDue = (j: Job) => (j.state === "Enqueued" || j.state === "Scheduled") && j.scheduleTime.getTime() <= at.getTime()
        const candidates = [...jobs.values()]
        // fair-share rows in tag order, merged with the rest by ScheduleTime (see `fairMerge`)
        const fair = candidates.filter((j) => pendingDue(j) && j.fairTag !== undefined && fifoPolicyOf(j) === undefined)
        // the plain pending rows through the admission (see `admit`), then the expired leases and the Fifo row
        const live = candidates.filter((j) => j.state === "Processing" && j.leaseUntil !== null && j.leaseUntil.getTime() >= at.getTime())
        const pending = candidates.filter((j) => pendingDue(j) && j.fairTag === undefined && fifoPolicyOf(j) === undefined).sort(byClaim)
        const plain = admit(pending, live, limit, overrides === undefined ? undefined : { read: overrides, now: at.getTime() })
          .concat(candidates.filter((j) => j.state === "Processing" && j.leaseUntil !== null && j.leaseUntil.getTime() < at.getTime()))
          .concat(fifo)
        const { rows: due, tags } = fairMerge(plain, fair, limit)
        // the tag swaps inside weighted keys (see `fairSwaps`): the rows left behind first
        for (const [id, fairTag] of tags) {
          const j = jobs.get(id)!
          if (!due.some((d) => d.id === id)) jobs.set(id, clone(j, { fairTag }))
        }
        return claimOrder(due.map((j) => {
          const recovered = j.state === "Processing"
          const next = clone(j, {
            state: "Processing",
            attempt: j.attempt + 1,
            lockedBy: workerId,
            leaseUntil: new Date(at.getTime() + Duration.toMillis(lease)),
            updatedAt: at,
            fairTag: tags.get(j.id) ?? j.fairTag
          })
          jobs.set(j.id, next)
          log(
            j.id,
            at,
            recovered ? "Recovered" : "Processing",
            recovered ? `Lease expired; attempt ${next.attempt} claimed by ${workerId}` : `Attempt ${next.attempt} claimed by ${workerId}`
          )
          return next
        }))
      }),

    finalize: ({ handlerRan = true, holdsSlot, job, metadata, outcome, workerId }) =>
      Effect.map(now, (at) => {
        const cur = jobs.get(job.id)
        if (cur === undefined || cur.state !== "Processing" || cur.lockedBy !== workerId || cur.attempt !== job.attempt) return false
        const state = stateOf(outcome, at)
        const pending = state === "Enqueued" || state === "Scheduled"
        // a requeue goes to the back of its flow (a new tag), unless it keeps its place or its tag
        const retag = retagsOn(outcome, state)
        const fair = retag ? fairOf(metadata) : undefined
        const fairTag = !retag ? cur.fairTag : fair === undefined ? undefined : fairTagOf(virtualTime(at), lastTag(fair.flow), fair.weight)
        const when =
          outcome._tag === "Requeued" && outcome.keepsPlace === true
            ? cur.scheduleTime
            : outcome._tag === "Requeued" && outcome.at !== undefined && outcome.at.getTime() > at.getTime()
              ? outcome.at
              : at
        jobs.set(
          job.id,
          clone(cur, {
            state,
            metadata: structuredClone(metadata),
            scheduleTime: pending ? when : cur.scheduleTime,
            lockedBy: null,
            leaseUntil: null,
            updatedAt: at,
            attempt: handlerRan ? cur.attempt : cur.attempt - 1,
            cancelRequested: pending ? cur.cancelRequested : undefined,
            fairTag
          })
        )
        holders.delete(job.id)
        const l = logOf(outcome)
        log(job.id, at, l.kind, l.message)
        bump(counterOf(outcome), job.type)
        // the handler ran under its key's slot, freed now: a hint when jobs of the key wait — due, or
        // claimed (this store ignores the fetch's `contended` hint: a lane that found the key full may
        // hold its next job while it backs off, and the hint ends that back-off)
        const key = handlerRan && holdsSlot !== true ? concurrencyKeyOf(metadata) : undefined
        if (key !== undefined) {
          for (const j of jobs.values()) {
            const waiting = j.state === "Processing" ? j.id !== job.id : (j.state === "Enqueued" || j.state === "Scheduled") && j.scheduleTime.getTime() <= at.getTime()
            if (waiting && concurrencyKeyOf(j.metadata) === key) {
              PubSub.publishUnsafe(hub, { _tag: "Freed", key })
              break
            }
          }
        }
        return true
      }),

    appendLog: (jobId, kind, message) =>
      Effect.map(now, (at) => {
        if (jobs.has(jobId)) log(jobId, at, kind, message)
      }),

    heartbeat: (workerId, ids, lease) =>
      Effect.map(now, (at) => {
        for (const id of ids) {
          const j = jobs.get(id)
          if (j !== undefined && j.state === "Processing" && j.lockedBy === workerId) {
            jobs.set(id, clone(j, { leaseUntil: new Date(at.getTime() + Duration.toMillis(lease)) }))
          }
        }
      }),

    requestCancel: (id, reason) =>
      Effect.map(now, (at): CancelResult => {
        const j = jobs.get(id)
        if (j === undefined) return "NotFound"
        switch (j.state) {
          case "Processing":
            jobs.set(id, clone(j, { cancelRequested: operatorCause(reason) }))
            return "Cancelling"
          case "Enqueued":
          case "Scheduled":
            jobs.set(id, clone(j, { state: "Deleted", lockedBy: null, leaseUntil: null, cancelRequested: undefined, updatedAt: at }))
            log(id, at, "Cancelled", cancelText(operatorCause(reason)))
            bump("stats:deleted", j.type)
            return "Cancelled"
          default:
            return "Finished"
        }
      }),

    markHolder: (id, workerId, key) =>
      Effect.sync(() => {
        const j = jobs.get(id)
        if (j !== undefined && j.state === "Processing" && j.lockedBy === workerId) holders.set(id, key)
      }),

    cancelHolders: (key, newer) =>
      Effect.sync(() => {
        const out: Array<string> = []
        for (const [id, k] of holders) {
          const j = jobs.get(id)
          if (k !== key || j === undefined || j.state !== "Processing" || j.cancelRequested !== undefined || id === newer.id) continue
          if (bySubmission(j, newer) >= 0) continue
          jobs.set(id, clone(j, { cancelRequested: replacedCause(key, newer.id) }))
          out.push(id)
        }
        return out.sort()
      }),

    cancelRequests: (workerId, ids) =>
      Effect.sync(() =>
        ids.flatMap((id) => {
          const j = jobs.get(id)
          return j !== undefined && j.state === "Processing" && j.lockedBy === workerId && j.cancelRequested !== undefined
            ? [{ id, cause: j.cancelRequested }]
            : []
        })
      ),

    reportWorker: (report) =>
      Effect.map(now, (at) => {
        const prev = workers.get(report.workerId)
        workers.set(report.workerId, {
          report: { ...report, lastOutage: report.lastOutage ?? prev?.report.lastOutage },
          startedAt: prev?.startedAt ?? at,
          seenAt: at
        })
      }),

    removeWorker: (workerId) => Effect.sync(() => void workers.delete(workerId)),

    workers: Effect.map(now, (at) =>
      [...workers.values()]
        .sort((a, b) => a.startedAt.getTime() - b.startedAt.getTime() || (a.report.workerId < b.report.workerId ? -1 : 1))
        .map(({ report, seenAt, startedAt }): WorkerInfo => {
          const held = [...jobs.values()].filter((j) => j.state === "Processing" && j.lockedBy === report.workerId)
          return {
            ...report,
            startedAt,
            seenAt,
            silentMs: Math.max(0, at.getTime() - seenAt.getTime()),
            holding: held.length,
            // an in-memory store has no connections to count
            connections: undefined
          }
        })
    ),

    recordSlotAudit: (findings) =>
      Effect.sync(() => {
        slotAudit = findings.map((f) => ({ ...f }))
      }),

    slotAuditFindings: Effect.sync(() => slotAudit),

    get: (id) =>
      Effect.suspend(() => {
        const job = jobs.get(id)
        if (job !== undefined) return Effect.succeed(Option.some({ job, logs: [...(logs.get(id) ?? [])] }))
        const t = tombstones.get(id)
        return t === undefined ? Effect.succeed(Option.none()) : Effect.fail(new JobExpired({ id, ...t }))
      }),

    prune: (plan) =>
      Effect.map(now, (at): PruneResult => {
        // one synchronous step: never two prunes at once in this process (the store's one process)
        const pruned = { Succeeded: 0, Failed: 0, Deleted: 0 }
        const ms = at.getTime()
        const dayAgo = ms - HISTORY_MS
        for (const j of expiredAt(plan, ms).slice(0, plan.batchSize)) {
          const state = j.state as TerminalState
          const key = concurrencyKeyOf(j.metadata)
          if (key !== undefined) {
            // the per-key figures of the last day, folded before the rows go (see `KeyInsight`)
            if (j.updatedAt.getTime() >= dayAgo && state !== "Failed") history.push({ key, at: new Date(historyBucket(j.updatedAt.getTime(), ms)), kind: state })
            for (const l of logs.get(j.id) ?? []) if (l.kind === "Requeued" && l.at.getTime() >= dayAgo) history.push({ key, at: new Date(historyBucket(l.at.getTime(), ms)), kind: "Requeued" })
          }
          jobs.delete(j.id)
          logs.delete(j.id)
          keyHolds.delete(j.id)
          if (j.jobKey !== undefined && keyHolders.get(`${j.type}\u0000${j.jobKey}`) === j.id) keyHolders.delete(`${j.type}\u0000${j.jobKey}`)
          originFor.delete(j.id)
          holders.delete(j.id)
          if (plan.tombstoneMs > 0) tombstones.set(j.id, { type: j.type, state, finishedAt: j.updatedAt, prunedAt: at })
          pruned[state]++
        }
        let gone = 0
        if (plan.tombstoneMs < FOREVER_MS) {
          const old = [...tombstones].filter(([, t]) => t.prunedAt.getTime() < ms - plan.tombstoneMs)
          old.sort(([, a], [, b]) => a.prunedAt.getTime() - b.prunedAt.getTime())
          for (const [id] of old.slice(0, plan.batchSize)) tombstones.delete(id)
          gone = Math.min(old.length, plan.batchSize)
        }
        let h = 0
        while (h < plan.batchSize && history.length > 0) {
          const i = history.findIndex((e) => e.at.getTime() < dayAgo)
          if (i < 0) break
          history.splice(i, 1)
          h++
        }
        const n = pruned.Succeeded + pruned.Failed + pruned.Deleted
        return { ran: true, pruned, tombstones: gone, full: n >= plan.batchSize || gone >= plan.batchSize }
      }),

    expiredBacklog: (plan, cap) => Effect.map(now, (at) => Math.min(cap, expiredAt(plan, at.getTime()).length)),

    list: ({ limit, offset, ...filter }) =>
      Effect.sync(() => {
        const all = [...jobs.values()]
          .filter((j) => matchesFilter(j, filter))
          .sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))
        return { rows: isWindow(limit, offset) ? all.slice(offset, offset + limit) : [], total: all.length }
      }),

    operate: (action, ids) =>
      Effect.map(now, (at) => {
        const from = operatorFrom[action]
        const to = operatorTo[action]
        const unique = new Set(ids)
        let changed = 0
        for (const id of unique) {
          const j = jobs.get(id)
          if (j === undefined || !from.includes(j.state)) continue
          // a weighted job sent back to the queue goes to the back of its key, as a policy's requeue
          const fair = to.state === "Enqueued" && j.fairTag !== undefined ? fairOf(j.metadata) : undefined
          const fairTag = to.state !== "Enqueued" ? j.fairTag : fair === undefined ? undefined : fairTagOf(virtualTime(at), lastTag(fair.flow), fair.weight)
          jobs.set(
            id,
            clone(j, {
              fairTag,
              state: to.state,
              scheduleTime: to.state === "Enqueued" ? at : j.scheduleTime,
              lockedBy: null,
              leaseUntil: null,
              updatedAt: at,
              // a retried or deleted job leaves any cancel asked for it behind; a requeued one keeps it
              cancelRequested: action === "requeue" ? j.cancelRequested : undefined
            })
          )
          log(id, at, to.kind, to.message)
          changed++
        }
        if (changed > 0 && to.state === "Enqueued") PubSub.publishUnsafe(hub, { _tag: "Due", count: changed })
        return { changed, skipped: unique.size - changed }
      }),

    countByState: Effect.sync(() => {
      const out = emptyCounts()
      for (const j of jobs.values()) out[j.state]++
      return out
    }),

    counters: Effect.sync(() => new Map(counters)),

    locks,

    wakeups: Effect.map(PubSub.subscribe(hub), Stream.fromSubscription),

    nextDue: Effect.map(now, (at) => {
      let earliest: number | undefined
      for (const j of jobs.values()) {
        const t = j.scheduleTime.getTime()
        if ((j.state === "Enqueued" || j.state === "Scheduled") && t > at.getTime() && (earliest === undefined || t < earliest)) earliest = t
      }
      return earliest === undefined ? Option.none() : Option.some(earliest - at.getTime())
    }),

    insight: KeyInsightMemory.make({ jobs, logs, originFor, history, reported: () => [...workers.values()].map((w) => ({ workerId: w.report.workerId, slots: w.report.slots })) })
  }
  return service
}))

/** A fresh in-memory store. */
export const layer: Layer.Layer<JobStore> = Layer.effect(JobStore, make)
