/**
 * The slot-leak audit (opt-in): a scoped Layer that, every `every`, compares the advisory slot locks
 * PostgreSQL says are held (`pg_locks`, this database, the one-`bigint` key space the PostgreSQL
 * semaphore provider takes slots in) with the jobs in `Processing` and their leases.
 *
 * Lock ids are hashes (`lockId(warp:concurrency:{key}:{i})`), so they cannot be mapped back to keys:
 * the audit computes the ids of the keys it knows — the keys of the Processing rows (stamped or
 * enqueue metadata, else the policy the registered handler or contract declares), the admin
 * overrides' keys, and `keys` from the options — for slots 0 .. max(known limit, `maxSlots`) - 1.
 * A lock whose id matches none of these is not a slot of a known key and is left alone.
 *
 * Per key: `excess` = slot locks held - Processing rows with a live lease.
 * - Stuck holders: while `excess` > 0, Processing rows of the key whose lease has expired (the holder
 *   stopped renewing, its lock is still held) — at most `excess` of them.
 * - Leaked slots: what remains of `excess`, attributed to sessions holding a slot lock of the key that
 *   have been idle (`pg_stat_activity.state` idle, or idle in a transaction) for at least `idleFor` — a live holder of the
 *   PostgreSQL provider is pinged every `pingInterval` and is never idle that long — longest idle
 *   first. Excess with no such session is transient (a release between the two reads) and not reported.
 *   A Processing row counts as a holder from its claim on, also while it is still in the gate: under
 *   contention (Wait-mode jobs cycling through Processing) one run can miss a leak a later run finds.
 *
 * Every run sets two gauges (`warp_slot_audit_leaked`, `warp_slot_audit_stuck`), logs one warning per
 * finding, keeps the report (`SlotAudit.lastReport`) and replaces the findings the job store keeps
 * (`JobStoreService.recordSlotAudit`; PostgreSQL: `warp_slot_audit`), which the dashboard's concurrency,
 * keys and workers pages show as a warning. With `terminateStale: true` each leaked
 * slot's session is ended with `pg_terminate_backend(pid)` — only if, at that moment, it is still idle
 * that long and still holds the slot (a multiplexed lane of the provider, pinged, never is) — (logged; a leak by definition has no job of
 * its key in that session, so there is no job to write an audit entry on). Stuck holders are only
 * reported: their jobs are recovered by the claim once their lease has expired.
 *
 * @since 0.3.0
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as SqlClient from "effect/sql/SqlClient"
import { Registry, type RegistryService } from "../job/Registry.js"
import { lockId } from "../semaphore/lockId.js"
import { slotName } from "../semaphore/SemaphoreProvider.js"
import { JobStore, type SlotAuditFinding } from "../store/JobStore.js"
import { LOCK_PREFIX } from "./ConcurrencyBehavior.js"

/** An advisory slot lock held by a session with no Processing job of its key to account for it. */
export interface LeakedSlot {
  readonly _tag: "LeakedSlot"
  readonly key: string
  readonly slot: number
  readonly pid: number
  readonly applicationName: string
  /** How long the session has been idle, in milliseconds. */
  readonly idleMs: number
  /** Whether this run ended the session (`terminateStale`). */
  readonly terminated: boolean
}

/** A Processing job whose lease has expired while a slot lock of its key is still held. */
export interface StuckHolder {
  readonly _tag: "StuckHolder"
  readonly key: string
  readonly jobId: string
  readonly lockedBy: string | null
  readonly leaseUntil: Date | null
  /** The sessions holding slot locks of the key. */
  readonly pids: ReadonlyArray<number>
}

/** One run's findings. */
export interface SlotAuditReport {
  readonly at: Date
  readonly leaked: ReadonlyArray<LeakedSlot>
  readonly stuck: ReadonlyArray<StuckHolder>
  /** Slot locks held of keys the audit knew (for context). */
  readonly heldSlots: number
  /** Keys whose slot ids were computed. */
  readonly keysChecked: number
}

/**
 * A report's findings as the job store keeps them (`JobStoreService.recordSlotAudit`): each leaked slot
 * and stuck holder, with what the report knows of it in words, found at the report's time.
 */
export const findingsOf = (report: SlotAuditReport): ReadonlyArray<SlotAuditFinding> => [
  ...report.leaked.map(
    (l): SlotAuditFinding => ({
      kind: "LeakedSlot",
      key: l.key,
      slot: l.slot,
      jobId: undefined,
      detail: `held by session ${l.pid} (${l.applicationName === "" ? "no application_name" : l.applicationName}), idle ${(l.idleMs / 1000).toFixed(1)} s, with no Processing job of the key to account for it${l.terminated ? "; the audit ended the session" : ""}`,
      foundAt: report.at
    })
  ),
  ...report.stuck.map(
    (s): SlotAuditFinding => ({
      kind: "StuckHolder",
      key: s.key,
      slot: undefined,
      jobId: s.jobId,
      detail: `Processing (claimed by ${s.lockedBy ?? "?"}) with its lease expired${s.leaseUntil === null ? "" : ` at ${s.leaseUntil.toISOString()}`} while the key's slot lock is held (sessions ${s.pids.join(", ")})`,
      foundAt: report.at
    })
  )
]

/** The audit's query (or the write of its findings to the job store) failed. */
export class SlotAuditError extends Data.TaggedError("SlotAuditError")<{ readonly cause: unknown }> {}

/** Options of {@link layer}. */
export interface SlotAuditOptions {
  /** How often to run (the first run is at start). */
  readonly every: Duration.Input
  /** End the session of each leaked slot with `pg_terminate_backend` (default false). */
  readonly terminateStale?: boolean | undefined
  /**
   * How long a session holding an unaccounted slot lock must have been idle to count as leaked
   * (default 10 seconds). Keep it well above the provider's `pingInterval` (default 1 second).
   */
  readonly idleFor?: Duration.Input | undefined
  /** Slots checked per key at least (default 64); more when a known limit is higher. */
  readonly maxSlots?: number | undefined
  /** Keys to check besides those of Processing rows and admin overrides (a leak of a key none of these name is not seen). */
  readonly keys?: ReadonlyArray<string> | undefined
}

/** The audit service. */
export interface SlotAuditService {
  /** The report of the last completed run, if any. */
  readonly lastReport: Effect.Effect<Option.Option<SlotAuditReport>>
  /** Runs one audit now (also updating the gauges, logging and keeping the report). */
  readonly runOnce: Effect.Effect<SlotAuditReport, SlotAuditError>
}

/** The audit service tag. */
export class SlotAudit extends Context.Service<SlotAudit, SlotAuditService>()("warp/SlotAudit") {}

/** Leaked slots found by the last run. */
export const leakedGauge = Metric.gauge("warp_slot_audit_leaked", { description: "Advisory slot locks held with no Processing job to account for them" })
/** Stuck holders found by the last run. */
export const stuckGauge = Metric.gauge("warp_slot_audit_stuck", { description: "Processing jobs whose lease expired while their key's slot lock is held" })
/** Sessions ended by the audit. */
export const terminatedTotal = Metric.counter("warp_slot_audit_terminated_total", { description: "Sessions ended by the slot audit" })

/** The concurrency key and declared limit of a policies object, if any. */
const declared = (policies: unknown): { key: string; limit: number } | undefined => {
  const c = (policies as { concurrency?: { key?: unknown; limit?: unknown } } | undefined)?.concurrency
  return typeof c?.key === "string" ? { key: c.key, limit: typeof c.limit === "number" ? c.limit : 1 } : undefined
}

/** The key (and limit) a Processing row runs under: its metadata, else what its handler or contract declares. */
const keyOfRow = (registry: RegistryService, row: { type: string; handler: string | null; metadata: any }) => {
  const stamped = row.metadata?.policies?.concurrency?.value
  if (typeof stamped?.key === "string") return { key: stamped.key as string, limit: Number(stamped.limit) || 1 }
  const registered = registry.lookup(row.type, row.handler)
  if (Option.isNone(registered)) return undefined
  const h = registered.value.handler as { policies?: unknown; contract?: { policies?: unknown } }
  return declared(h.policies) ?? declared(h.contract?.policies)
}

/** Idle states of `pg_stat_activity` (a session sitting in an open transaction counts too). */
const isIdle = (state: string | null) => state === "idle" || state === "idle in transaction" || state === "idle in transaction (aborted)"

interface HeldLock {
  readonly pid: number
  readonly id: string
  readonly state: string | null
  readonly idleMs: number
  readonly applicationName: string
}

/**
 * Builds the audit on the `SqlClient`, `Registry` and `JobStore` in context (no schedule). Each run
 * replaces the findings the job store keeps (`recordSlotAudit`), which the dashboard shows.
 */
export const make = (options: Omit<SlotAuditOptions, "every">) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const registry = yield* Registry
    const store = yield* JobStore
    const last = yield* Ref.make(Option.none<SlotAuditReport>())
    const idleForMs = Duration.toMillis(Duration.fromInputUnsafe(options.idleFor ?? "10 seconds"))
    const minSlots = options.maxSlots ?? 64
    const terminate = options.terminateStale === true

    const snapshot = sql`
      SELECT
        (SELECT coalesce(json_agg(json_build_object(
           'id', id, 'type', type, 'handler', handler, 'metadata', metadata, 'locked_by', locked_by,
           'lease_until', lease_until, 'expired', lease_until < now())), '[]'::json)
         FROM warp_jobs WHERE state = 'Processing') AS jobs,
        (SELECT coalesce(json_agg(json_build_object(
           'pid', l.pid, 'id', ((l.classid::bigint << 32) | l.objid::bigint)::text, 'state', a.state,
           'idle_ms', floor(extract(epoch FROM now() - a.state_change) * 1000), 'app', a.application_name)), '[]'::json)
         FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
         WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND l.pid <> pg_backend_pid()
           AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())) AS locks,
        (SELECT CASE WHEN to_regclass('warp_concurrency_limits') IS NULL THEN '[]'::json
                ELSE (SELECT coalesce(json_agg(json_build_object('key', key, 'slots', slots)), '[]'::json) FROM warp_concurrency_limits) END) AS limits`

    const parse = (u: unknown): Array<any> => (typeof u === "string" ? JSON.parse(u) : ((u as Array<any>) ?? []))

    const runOnce: Effect.Effect<SlotAuditReport, SlotAuditError> = Effect.gen(function* () {
      const rows = yield* snapshot
      const r = rows[0] as any
      const jobs = parse(r.jobs)
      const locks: Array<HeldLock> = parse(r.locks).map((l: any) => ({
        pid: Number(l.pid),
        id: String(l.id),
        state: l.state ?? null,
        idleMs: Number(l.idle_ms ?? 0),
        applicationName: String(l.app ?? "")
      }))
      // the keys known, with the largest limit known for each
      const limits = new Map<string, number>()
      const know = (key: string, limit: number) => limits.set(key, Math.max(limits.get(key) ?? 0, limit, minSlots))
      const jobKeys = jobs.map((j) => {
        const k = keyOfRow(registry, j)
        if (k !== undefined) know(k.key, k.limit)
        return k?.key
      })
      for (const l of parse(r.limits)) know(String(l.key), Number(l.slots))
      for (const k of options.keys ?? []) know(k, 1)
      const byId = new Map<string, { key: string; slot: number }>()
      for (const [key, limit] of limits) {
        for (let i = 0; i < limit; i++) byId.set(lockId(slotName(LOCK_PREFIX + key, i)), { key, slot: i })
      }
      const held = new Map<string, Array<HeldLock & { slot: number }>>()
      for (const l of locks) {
        const hit = byId.get(l.id)
        if (hit !== undefined) held.set(hit.key, [...(held.get(hit.key) ?? []), { ...l, slot: hit.slot }])
      }
      const leaked: Array<LeakedSlot> = []
      const stuck: Array<StuckHolder> = []
      for (const [key, holders] of held) {
        const mine = jobs.filter((_, i) => jobKeys[i] === key)
        const live = mine.filter((j) => j.expired !== true)
        let excess = holders.length - live.length
        for (const j of mine.filter((j) => j.expired === true)) {
          if (excess <= 0) break
          stuck.push({
            _tag: "StuckHolder",
            key,
            jobId: String(j.id),
            lockedBy: j.locked_by ?? null,
            leaseUntil: j.lease_until === null ? null : new Date(j.lease_until),
            pids: holders.map((h) => h.pid)
          })
          excess--
        }
        if (excess <= 0) continue
        const idle = holders.filter((h) => isIdle(h.state) && h.idleMs >= idleForMs).sort((a, b) => b.idleMs - a.idleMs)
        for (const h of idle.slice(0, excess)) {
          leaked.push({ _tag: "LeakedSlot", key, slot: h.slot, pid: h.pid, applicationName: h.applicationName, idleMs: h.idleMs, terminated: false })
        }
      }
      if (terminate) {
        for (let i = 0; i < leaked.length; i++) {
          const l = leaked[i]!
          // only if, at this moment, the session is still idle that long and still holds the slot
          const ended = yield* sql`
            SELECT pg_terminate_backend(a.pid) AS ok FROM pg_stat_activity a
            WHERE a.pid = ${l.pid} AND a.state IN ('idle', 'idle in transaction', 'idle in transaction (aborted)')
              AND a.state_change <= now() - ${idleForMs} * interval '1 millisecond'
              AND EXISTS (SELECT 1 FROM pg_locks k WHERE k.pid = a.pid AND k.locktype = 'advisory' AND k.objsubid = 1 AND k.granted
                            AND ((k.classid::bigint << 32) | k.objid::bigint)::text = ${lockId(slotName(LOCK_PREFIX + l.key, l.slot))})`.pipe(
            Effect.map((rows) => (rows[0] as any)?.ok === true)
          )
          leaked[i] = { ...l, terminated: ended }
          if (ended) {
            yield* Metric.update(terminatedTotal, 1)
            yield* Effect.logWarning(`Slot audit: terminated session ${l.pid} holding leaked slot ${l.slot} of '${l.key}'`).pipe(
              Effect.annotateLogs({ key: l.key, slot: l.slot, pid: l.pid, application_name: l.applicationName })
            )
          }
        }
      }
      const report: SlotAuditReport = {
        at: new Date(),
        leaked,
        stuck,
        heldSlots: [...held.values()].reduce((n, h) => n + h.length, 0),
        keysChecked: limits.size
      }
      for (const l of report.leaked) {
        yield* Effect.logWarning(
          `Slot audit: leaked slot ${l.slot} of '${l.key}' held by session ${l.pid} (${l.applicationName || "no application_name"}), idle ${l.idleMs} ms, with no Processing job of the key to account for it`
        ).pipe(Effect.annotateLogs({ key: l.key, slot: l.slot, pid: l.pid, finding: "LeakedSlot" }))
      }
      for (const s of report.stuck) {
        yield* Effect.logWarning(
          `Slot audit: stuck holder — job ${s.jobId} of '${s.key}' (claimed by ${s.lockedBy ?? "?"}) is Processing with its lease expired at ${s.leaseUntil?.toISOString() ?? "?"} while the key's slot lock is held (sessions ${s.pids.join(", ")})`
        ).pipe(Effect.annotateLogs({ key: s.key, job_id: s.jobId, finding: "StuckHolder" }))
      }
      yield* Metric.update(leakedGauge, report.leaked.length)
      yield* Metric.update(stuckGauge, report.stuck.length)
      yield* Ref.set(last, Option.some(report))
      // the dashboard reads the latest findings from the store (a failed write fails the run; the report is kept)
      yield* store.recordSlotAudit(findingsOf(report))
      return report
    }).pipe(Effect.mapError((cause) => new SlotAuditError({ cause })), Effect.withSpan("warp.slot_audit", {}, { captureStackTrace: false }))

    const service: SlotAuditService = { lastReport: Ref.get(last), runOnce }
    return service
  })

/**
 * The audit, run every `options.every` in a fiber of the layer's scope (a failed run is logged and
 * the schedule goes on).
 */
export const layer = (options: SlotAuditOptions): Layer.Layer<SlotAudit, never, SqlClient.SqlClient | Registry | JobStore> =>
  Layer.effect(
    SlotAudit,
    Effect.gen(function* () {
      const service = yield* make(options)
      yield* service.runOnce.pipe(
        Effect.catch((e) => Effect.logWarning("Slot audit run failed", e.cause)),
        Effect.repeat(Schedule.spaced(options.every)),
        Effect.forkScoped
      )
      return service
    })
  )
