/**
 * A model of the concurrency gate with total caps, for property tests: generated schedules over keys
 * (limits, Skip/Wait jobs) in one or two groups with a total cap, a ledger that records every slot
 * the gate asks for and every handler run in one global order, and a checker that replays that order
 * against the model.
 *
 * The ledger wraps the semaphore provider: each `tryAcquire` is tied to its job through the attempt's
 * log annotation (`warp.job.id`). It keeps its own count of held slots per name (from each grant to the
 * close of its scope) and of handlers inside per key and per group, and flags at once:
 * - a handler inside while more than `limit` of its key, or more than `total` of its group, are inside;
 * - a grant while the ledger already counts `limit` holders of the name (`exactRelease` only: on
 *   PostgreSQL the worker unlocks the key's slot in its finalizing statement, before the attempt's
 *   scope closes, so the ledger may count a released slot for a moment);
 * - a "full" answer while the ledger counts fewer than `limit` holders (sound everywhere: the ledger
 *   never counts fewer holders than the provider has).
 *
 * The per-job model ({@link checkJobs}): each attempt of a job asks its key's slot and, when it got it
 * and the job has a total cap, its group's slot. The model predicts the attempt's audit entry from
 * those answers — key full: `Cancelled — '{key}' full (N slots)` (Skip) / `Requeued — '{key}' full (N
 * slots)` (Wait); group full: `Cancelled — group '{g}' full (N slots)` / `Requeued — group …`; both
 * granted: the handler runs once and the job Succeeds — and the job's trail must be exactly that
 * sequence. A job whose key was full asks nothing of its group; a Wait job ends Succeeded with exactly
 * one handler run; a Skip job ends Succeeded the same way, or Deleted by its one full answer.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as References from "effect/References"
import * as fc from "fast-check"
import { JobParameters } from "warp-effect"
import {
  cancelledText,
  groupCancelledText,
  groupRequeuedText,
  LOCK_PREFIX,
  requeuedText,
  TOTAL_PREFIX
} from "../../src/internal/concurrency/ConcurrencyBehavior.js"
import type { JobLog } from "../../src/internal/job/Job.js"
import type { SemaphoreProviderService, Slot } from "../../src/internal/semaphore/SemaphoreProvider.js"

export type CapMode = "Skip" | "Wait"

export interface CapGroup {
  readonly name: string
  readonly limit: number
}
export interface CapKey {
  readonly name: string
  readonly limit: number
  /** Index into {@link CapWorkload.groups}, or null: no total cap. */
  readonly group: number | null
}
export interface CapJob {
  readonly index: number
  readonly key: number
  readonly mode: CapMode
  readonly durationMs: number
  readonly arrivalMs: number
}
export interface CapWorkload {
  readonly groups: ReadonlyArray<CapGroup>
  readonly keys: ReadonlyArray<CapKey>
  readonly jobs: ReadonlyArray<CapJob>
  readonly fibers: number
  /** Yields before each provider call, used in turn: they shift the fibers' interleaving at one instant. */
  readonly yields: ReadonlyArray<number>
}

export interface CapArbitraryOptions {
  readonly maxJobs: number
  readonly durationsMs: ReadonlyArray<number>
  readonly maxArrivalMs: number
  readonly maxFibers: number
  /** Distinguishes the names of one run from another's (runs sharing one database). */
  readonly prefix?: string
}

/**
 * Schedules: one or two groups (total 1..3), one to four keys (limit 1..3), each in a group or (now and
 * then) in none, up to `maxJobs` jobs each of a key and a mode, with a duration and an arrival.
 */
export const capWorkload = (o: CapArbitraryOptions): fc.Arbitrary<CapWorkload> =>
  // no `chain`: a flat record shrinks well (jobs pick their key modulo the keys, keys their group)
  fc
    .record({
      groups: fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 1, maxLength: 2 }),
      keys: fc.array(fc.record({ limit: fc.integer({ min: 1, max: 3 }), group: fc.integer({ min: 0, max: 5 }) }), { minLength: 1, maxLength: 4 }),
      jobs: fc.array(
        fc.record({
          key: fc.nat({ max: 3 }),
          mode: fc.constantFrom<CapMode>("Wait", "Skip"),
          durationMs: fc.constantFrom(...o.durationsMs),
          arrivalMs: fc.integer({ min: 0, max: o.maxArrivalMs })
        }),
        { minLength: 1, maxLength: o.maxJobs }
      ),
      fibers: fc.integer({ min: 1, max: o.maxFibers }),
      yields: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 8 })
    })
    .map((w) => ({
      groups: w.groups.map((limit, i) => ({ name: `${o.prefix ?? ""}g${i}`, limit })),
      // group draws beyond twice the groups leave the key outside any group
      keys: w.keys.map((k, i) => ({ name: `${o.prefix ?? ""}k${i}`, limit: k.limit, group: k.group < w.groups.length * 2 ? k.group % w.groups.length : null })),
      jobs: w.jobs.map((j, index) => ({ ...j, key: j.key % w.keys.length, index })),
      fibers: w.fibers,
      yields: w.yields
    }))

/** The total cap of a key, as declared. */
export const totalOf = (w: CapWorkload, key: CapKey): { readonly group: string; readonly limit: number } | undefined =>
  key.group === null ? undefined : { group: w.groups[key.group]!.name, limit: w.groups[key.group]!.limit }

/** A job's enqueue-time declaration: `withMutex` at limit 1, else `withSemaphore`, with its key's total cap. */
export const capParameters = (w: CapWorkload, job: CapJob, mode: string = job.mode): JobParameters.JobParameters => {
  const key = w.keys[job.key]!
  const total = totalOf(w, key)
  const m = mode as "Skip" | "Wait" | "CancelRunning"
  return key.limit === 1 ? JobParameters.make().withMutex(key.name, m, total) : JobParameters.make().withSemaphore(key.name, key.limit, m, total)
}

/** One gate answer, in ledger order. */
export interface GateEvent {
  readonly seq: number
  /** The provider call (also counts calls the gate never answered, e.g. interrupted ones). */
  readonly call: number
  readonly jobId: string | undefined
  readonly name: string
  readonly limit: number
  readonly granted: boolean
  /** Holders of the name the ledger counted when the answer came. */
  readonly heldBefore: number
}

const annotation = (key: string) =>
  Effect.map(References.CurrentLogAnnotations, (a) => a[key] as string | undefined)

/** The gate answers and handler runs of one run, in one order, with the violations found on the way. */
export class Ledger {
  private seq = 0
  readonly events: Array<GateEvent> = []
  readonly held = new Map<string, number>()
  readonly inside = new Map<string, number>()
  readonly maxInside = new Map<string, number>()
  readonly maxHeld = new Map<string, number>()
  readonly runs = new Map<string, number>()
  /** Handler runs that ended by interruption, per job. */
  readonly interrupted = new Map<string, number>()
  readonly violations: Array<string> = []
  /** Every grant, full answer and release, in order (for diagnosis). */
  readonly trace: Array<string> = []
  /** Each provider call's start, answer and release, in order (for {@link problems}). */
  private readonly timeline: Array<{ readonly kind: "start" | "answer" | "release"; readonly call: number; readonly name: string; readonly granted?: boolean }> = []
  private calls = 0

  constructor(readonly exactRelease: boolean) {}

  /**
   * Every violation: those flagged as they happened, and (without `exactRelease`) the "full" answers that
   * no instant of their call can explain. On PostgreSQL the replies of concurrent calls are handled in
   * any order, so a "full" answer is checked over its whole call: at some point between the call's start
   * and its answer, the ledger's holders plus the concurrent calls that were granted (answered later)
   * must reach the limit. (The ledger counts a slot from its grant's reply until after the provider has
   * released it, so a slot held on the server at the scan is one of those.)
   */
  problems(): Array<string> {
    if (this.exactRelease) return [...this.violations]
    const granted = new Map<number, boolean>()
    for (const e of this.timeline) if (e.kind === "answer") granted.set(e.call, e.granted!)
    const held = new Map<string, number>()
    const pending = new Map<string, Set<number>>()
    /** Open "full" calls: the most (holders + concurrent grants) seen since each started. */
    const open = new Map<number, { name: string; best: number }>()
    const out: Array<string> = []
    const measure = (name: string) => {
      const now = (held.get(name) ?? 0) + [...(pending.get(name) ?? [])].filter((c) => granted.get(c) === true).length
      for (const o of open.values()) if (o.name === name) o.best = Math.max(o.best, now)
    }
    for (const e of this.timeline) {
      if (e.kind === "start") {
        pending.set(e.name, new Set([...(pending.get(e.name) ?? []), e.call]))
        if (granted.get(e.call) === false) open.set(e.call, { name: e.name, best: 0 })
      } else if (e.kind === "answer") {
        pending.get(e.name)!.delete(e.call)
        if (e.granted) held.set(e.name, (held.get(e.name) ?? 0) + 1)
        const o = open.get(e.call)
        if (o !== undefined) {
          measure(e.name)
          open.delete(e.call)
          const limit = this.events.find((x) => x.call === e.call)!.limit
          if (o.best < limit) out.push(`'${e.name}' answered full while at most ${o.best} of ${limit} were held or being granted (call ${e.call})`)
        }
      } else held.set(e.name, held.get(e.name)! - 1)
      measure(e.name)
    }
    return [...this.violations, ...out]
  }

  /** Wraps a provider: records every answer and release; `yields` are taken in turn before each call. */
  provider(inner: SemaphoreProviderService, yields: ReadonlyArray<number> = [0]): SemaphoreProviderService {
    let turn = 0
    const self = this
    return {
      tryAcquire: (name, limit, timeout) =>
        Effect.gen(function* () {
          const n = yields[turn++ % yields.length]!
          for (let i = 0; i < n; i++) yield* Effect.yieldNow
          const jobId = yield* annotation("warp.job.id")
          // registered before the provider's own release, so it runs after it (a scope's finalizers run in
          // reverse order): the ledger stops counting a slot only once the provider has let it go
          let granted = false
          const call = self.calls++
          yield* Effect.addFinalizer(() =>
            Effect.sync(() => {
              if (!granted) return
              self.held.set(name, self.held.get(name)! - 1)
              self.timeline.push({ kind: "release", call, name })
              self.trace.push(`${Date.now()} release ${name} by ${jobId}`)
            })
          )
          self.timeline.push({ kind: "start", call, name })
          const slot = yield* inner.tryAcquire(name, limit, timeout)
          const heldBefore = self.held.get(name) ?? 0
          self.timeline.push({ kind: "answer", call, name, granted: Option.isSome(slot) })
          self.events.push({ seq: self.seq++, call, jobId, name, limit, granted: Option.isSome(slot), heldBefore })
          self.trace.push(`${Date.now()} ${Option.isSome(slot) ? "grant" : "full"} ${name} to ${jobId} (${heldBefore} held before)`)
          if (Option.isNone(slot)) {
            if (self.exactRelease && heldBefore < limit) self.violations.push(`'${name}' answered full with ${heldBefore} of ${limit} held (job ${jobId})`)
            return slot
          }
          granted = true
          self.held.set(name, heldBefore + 1)
          self.maxHeld.set(name, Math.max(self.maxHeld.get(name) ?? 0, heldBefore + 1))
          if (self.exactRelease && heldBefore + 1 > limit) self.violations.push(`'${name}' granted to job ${jobId} with ${heldBefore} of ${limit} already held`)
          return slot
        })
    }
  }

  /** Runs `body` counted as a handler inside `key` (limit `limit`) and, with a total cap, inside its group. */
  hold<A, E, R>(
    jobId: string,
    key: { readonly name: string; readonly limit: number },
    total: { readonly group: string; readonly limit: number } | undefined,
    body: Effect.Effect<A, E, R>
  ): Effect.Effect<A, E, R> {
    const names = total === undefined ? [[key.name, key.limit] as const] : [[key.name, key.limit] as const, [`group:${total.group}`, total.limit] as const]
    return Effect.acquireUseRelease(
      Effect.sync(() => {
        this.runs.set(jobId, (this.runs.get(jobId) ?? 0) + 1)
        this.trace.push(`${Date.now()} enter ${jobId}`)
        for (const [name, limit] of names) {
          const n = (this.inside.get(name) ?? 0) + 1
          this.inside.set(name, n)
          this.maxInside.set(name, Math.max(this.maxInside.get(name) ?? 0, n))
          if (n > limit) this.violations.push(`${n} handlers inside '${name}' (limit ${limit}) as job ${jobId} entered`)
        }
      }),
      () => body,
      (_, exit) =>
        Effect.sync(() => {
          names.forEach(([name]) => this.inside.set(name, this.inside.get(name)! - 1))
          this.trace.push(`${Date.now()} exit ${jobId} ${exit._tag}${Exit.hasInterrupts(exit) ? " (interrupted)" : ""}`)
          if (Exit.hasInterrupts(exit)) this.interrupted.set(jobId, (this.interrupted.get(jobId) ?? 0) + 1)
        })
    )
  }
}

/** A provider wrapper that ignores group slots (answers "granted" without asking): a deliberate bug. */
export const ignoringGroups = (inner: SemaphoreProviderService): SemaphoreProviderService => ({
  tryAcquire: (name, limit, timeout) =>
    name.startsWith(TOTAL_PREFIX) ? Effect.succeed(Option.some<Slot>({ name, index: 0, lost: Effect.never })) : inner.tryAcquire(name, limit, timeout)
})

/** What a job's trail and runs must be, given its gate answers. */
const OUTCOME_KINDS = new Set(["Succeeded", "Failed", "Cancelled", "Requeued"])

/**
 * The per-job model (see the module comment): returns one line per discrepancy (empty: the run agrees).
 */
export const checkJobs = (
  w: CapWorkload,
  ledger: Ledger,
  jobs: ReadonlyArray<{ readonly job: CapJob; readonly id: string; readonly state: string; readonly logs: ReadonlyArray<Pick<JobLog, "kind" | "message">> }>
): Array<string> => {
  const problems: Array<string> = []
  const byJob = new Map<string, Array<GateEvent>>()
  for (const e of ledger.events) if (e.jobId !== undefined) byJob.set(e.jobId, [...(byJob.get(e.jobId) ?? []), e])
  for (const { id, job, logs, state } of jobs) {
    const key = w.keys[job.key]!
    const total = totalOf(w, key)
    const events = byJob.get(id) ?? []
    const expected: Array<string> = []
    let ran = 0
    for (let i = 0; i < events.length; i++) {
      const k = events[i]!
      const where = `job ${job.index} (${id})`
      if (k.name !== LOCK_PREFIX + key.name || k.limit !== key.limit) {
        problems.push(`${where}: an attempt asked '${k.name}' at ${k.limit} first, not its key '${key.name}' at ${key.limit}`)
        break
      }
      if (!k.granted) {
        expected.push(job.mode === "Skip" ? `Cancelled: ${cancelledText(key.name, key.limit)}` : `Requeued: ${requeuedText(key.name, key.limit)}`)
        continue
      }
      if (total !== undefined) {
        const g = events[++i]
        if (g === undefined || g.name !== TOTAL_PREFIX + total.group || g.limit !== total.limit) {
          problems.push(`${where}: granted its key, then did not ask its group '${total.group}' at ${total.limit} (${JSON.stringify(g)})`)
          break
        }
        if (!g.granted) {
          expected.push(job.mode === "Skip" ? `Cancelled: ${groupCancelledText(total.group, total.limit)}` : `Requeued: ${groupRequeuedText(total.group, total.limit)}`)
          continue
        }
      }
      ran++
      expected.push("Succeeded: Succeeded")
    }
    const actual = logs.filter((l) => OUTCOME_KINDS.has(l.kind)).map((l) => `${l.kind}: ${l.message}`)
    const context = `job ${job.index} (${job.mode}, key ${key.name}/${key.limit}${total ? `, group ${total.group}/${total.limit}` : ""})`
    if (JSON.stringify(actual) !== JSON.stringify(expected)) problems.push(`${context}: trail ${JSON.stringify(actual)}, model ${JSON.stringify(expected)}`)
    if ((ledger.runs.get(id) ?? 0) !== ran) problems.push(`${context}: ${ledger.runs.get(id) ?? 0} handler runs, model ${ran}`)
    const ok = state === "Succeeded" ? ran === 1 : state === "Deleted" && job.mode === "Skip" && ran === 0
    if (!ok) {
      problems.push(`${context}: ended ${state} after ${ran} runs`)
    }
  }
  return problems
}
