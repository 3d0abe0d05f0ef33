/**
 * A model of `CancelRunning` keys, for property tests: generated schedules of jobs over a few keys
 * (limits 1-3, every job `CancelRunning`) with handler durations and arrivals, and the checker of a
 * run's outcome against the model (the ledger of `capModel.ts` counts the slots and the handlers
 * inside, and which handler runs were interrupted).
 *
 * The model, per key, with submission order = enqueue order (ids are time-ordered):
 * - at most `limit` handlers of the key inside at any instant (the ledger flags it as it happens);
 * - every job ends Succeeded (its handler ran exactly once, to the end) or Deleted with
 *   `Cancelled — replaced by newer job {id} of '{key}'`, where `{id}` is a job of the same key submitted
 *   after it whose own trail has a `Requeued — '{key}' full (N slots); cancelling older running job(s)
 *   …` entry naming it; with ` (running attempt N interrupted)` when its handler had started (N its
 *   attempt), and then its one handler run was interrupted; without it, its handler never ran;
 * - a handler run that was interrupted belongs to a job that ends Deleted so (a replaced holder is
 *   never requeued or run again);
 * - every requeue has the exact text: `Requeued — '{key}' full (N slots)`, and the cancelling suffix
 *   names only older jobs of the key;
 * - the newest job of each key ends Succeeded after one uninterrupted handler run.
 */
import * as fc from "fast-check"
import { JobParameters } from "warp-effect"
import { requeuedText } from "../../src/internal/concurrency/ConcurrencyBehavior.js"
import type { JobLog } from "../../src/internal/job/Job.js"
import { cancelText, replacedCause } from "../../src/internal/store/JobStore.js"
import type { Ledger } from "./capModel.js"

export interface CrKey {
  readonly name: string
  readonly limit: number
}
export interface CrJob {
  readonly index: number
  readonly key: number
  readonly durationMs: number
  readonly arrivalMs: number
}
export interface CrWorkload {
  readonly keys: ReadonlyArray<CrKey>
  readonly jobs: ReadonlyArray<CrJob>
  readonly fibers: number
  readonly yields: ReadonlyArray<number>
}

export const crWorkload = (o: {
  readonly maxJobs: number
  readonly durationsMs: ReadonlyArray<number>
  readonly maxArrivalMs: number
  readonly maxFibers: number
  readonly maxLimit: number
}): fc.Arbitrary<CrWorkload> =>
  fc
    .record({
      keys: fc.array(fc.integer({ min: 1, max: o.maxLimit }), { minLength: 1, maxLength: 3 }),
      jobs: fc.array(
        fc.record({ key: fc.nat({ max: 2 }), durationMs: fc.constantFrom(...o.durationsMs), arrivalMs: fc.integer({ min: 0, max: o.maxArrivalMs }) }),
        { minLength: 1, maxLength: o.maxJobs }
      ),
      fibers: fc.integer({ min: 1, max: o.maxFibers }),
      yields: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 8 })
    })
    .map((w) => ({
      keys: w.keys.map((limit, i) => ({ name: `cr${i}`, limit })),
      jobs: w.jobs.map((j, index) => ({ ...j, key: j.key % w.keys.length, index })),
      fibers: w.fibers,
      yields: w.yields
    }))

/** A job's enqueue-time declaration: `Mutex(key, CancelRunning)` at limit 1, else `Semaphore`. */
export const crParameters = (key: CrKey): JobParameters.JobParameters =>
  key.limit === 1 ? JobParameters.make().withMutex(key.name, "CancelRunning") : JobParameters.make().withSemaphore(key.name, key.limit, "CancelRunning")

const OUTCOME_KINDS = new Set(["Succeeded", "Failed", "Cancelled", "Requeued"])
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/**
 * Checks a run against the model; `jobs` in submission order. Returns one line per discrepancy, and
 * what the run exercised (replacements, and how many of them interrupted a running handler).
 */
export const checkCancelRunning = (
  w: CrWorkload,
  ledger: Ledger,
  jobs: ReadonlyArray<{ readonly job: CrJob; readonly id: string; readonly state: string; readonly logs: ReadonlyArray<Pick<JobLog, "kind" | "message">> }>
): { readonly problems: Array<string>; readonly replaced: number; readonly interrupted: number } => {
  const problems: Array<string> = []
  const position = new Map(jobs.map((j, i) => [j.id, i]))
  const keyOf = new Map(jobs.map((j) => [j.id, w.keys[j.job.key]!.name]))
  // who each job's requeues said they were cancelling
  const asked = new Map<string, Set<string>>()
  let replaced = 0
  let interruptedRuns = 0
  for (const { id, job, logs } of jobs) {
    const key = w.keys[job.key]!
    const requeue = new RegExp(`^${escape(requeuedText(key.name, key.limit))}(?:; cancelling older running (?:job|jobs) (.+))?$`)
    for (const l of logs.filter((l) => l.kind === "Requeued")) {
      const m = requeue.exec(l.message)
      if (m === null) {
        problems.push(`job ${job.index}: requeue text '${l.message}'`)
        continue
      }
      for (const older of m[1]?.split(", ") ?? []) {
        if (keyOf.get(older) !== key.name || position.get(older)! >= position.get(id)!) problems.push(`job ${job.index} asked to cancel ${older}, not an older job of '${key.name}'`)
        asked.set(older, new Set([...(asked.get(older) ?? []), id]))
      }
    }
  }
  for (const { id, job, logs, state } of jobs) {
    const key = w.keys[job.key]!
    const runs = ledger.runs.get(id) ?? 0
    const interrupted = ledger.interrupted.get(id) ?? 0
    interruptedRuns += interrupted
    const outcomes = logs.filter((l) => OUTCOME_KINDS.has(l.kind))
    const last = outcomes.at(-1)
    const context = `job ${job.index} (${id}, key ${key.name}/${key.limit}, ${state}, ${runs} runs, ${interrupted} interrupted, trail ${JSON.stringify(outcomes.map((l) => l.message))})`
    if (outcomes.slice(0, -1).some((l) => l.kind !== "Requeued")) problems.push(`${context}: an outcome before the last that is not a requeue`)
    if (state === "Succeeded") {
      if (runs !== 1 || interrupted !== 0 || last?.kind !== "Succeeded") problems.push(`${context}: Succeeded, but not after one uninterrupted run`)
      continue
    }
    if (state !== "Deleted" || last?.kind !== "Cancelled") {
      problems.push(`${context}: neither Succeeded nor Deleted by a cancel`)
      continue
    }
    replaced++
    const m = /^Cancelled — replaced by newer job (\S+) of '(.+)'(?: \(running attempt (\d+) interrupted\))?$/.exec(last.message)
    if (m === null) {
      problems.push(`${context}: cancel text '${last.message}'`)
      continue
    }
    const [, newer, k, attempt] = m
    const running = attempt === undefined ? undefined : { attempt: Number(attempt) }
    if (last.message !== cancelText(replacedCause(key.name, newer!), running) || k !== key.name) problems.push(`${context}: cancel text '${last.message}'`)
    if (keyOf.get(newer!) !== key.name || position.get(newer!)! <= position.get(id)!) problems.push(`${context}: replaced by ${newer}, not a newer job of its key`)
    if (!asked.get(id)?.has(newer!)) problems.push(`${context}: ${newer}'s trail never asked to cancel it`)
    // the handler of a job cancelled while running was interrupted (it may not have reached the body yet);
    // a job cancelled before its handler started never ran
    if (running === undefined ? runs !== 0 : runs > 1 || runs !== interrupted) problems.push(`${context}: runs do not match the cancel text`)
    if (running !== undefined) {
      const claim = logs.filter((l) => l.kind === "Processing").at(-1)?.message ?? ""
      if (!new RegExp(`^Attempt ${running.attempt} claimed by `).test(claim)) problems.push(`${context}: interrupted attempt ${running.attempt}, but its last claim was '${claim}'`)
    }
  }
  // every interrupted run belongs to a job that ended Deleted by a cancel (checked above per job);
  for (const [id, n] of ledger.interrupted) {
    const j = jobs.find((x) => x.id === id)
    if (n > 0 && j?.state !== "Deleted") problems.push(`job ${j?.job.index} (${id}): a run was interrupted, yet it ended ${j?.state}`)
  }
  // the newest job of each key
  for (const key of w.keys) {
    const newest = jobs.filter((j) => w.keys[j.job.key]!.name === key.name).at(-1)
    if (newest !== undefined && (newest.state !== "Succeeded" || (ledger.interrupted.get(newest.id) ?? 0) !== 0)) {
      problems.push(`the newest job of '${key.name}' (job ${newest.job.index}) ended ${newest.state}`)
    }
  }
  return { problems, replaced, interrupted: interruptedRuns }
}
