/**
 * Generated enqueue schedules for property tests: jobs with an optional concurrency declaration
 * (`Mutex(key)` = limit 1, `Semaphore(key, N)`; Skip or Wait), a handler duration, a handler result
 * (succeed, fail or die) and an arrival offset. The arbitraries are `fast-check` ones (an optional
 * peer dependency: Effect 4 no longer re-exports fast-check); run a workload with `TestRuntime.run`.
 *
 * @since 0.2.0
 */
import * as fc from "fast-check"
import { JobParameters } from "../publisher/JobParameters.js"

/**
 * What a job's handler does when it plays its part (`TestRuntime.play`): return, fail with
 * `SimulatedFailure`, or die.
 *
 * @since 0.2.0
 * @category models
 */
export type Result = "succeed" | "fail" | "die"

/**
 * The behaviour of a concurrency key when it is full: `Skip` drops the surplus job (it ends
 * `Deleted`), `Wait` requeues it.
 *
 * @since 0.2.0
 * @category models
 */
export type Mode = "Skip" | "Wait"

/**
 * A concurrency declaration: `limit` 1 is `Mutex(key)`, more is `Semaphore(key, limit)`.
 *
 * @since 0.2.0
 * @category models
 */
export interface KeyDeclaration {
  readonly key: string
  readonly limit: number
  readonly mode: Mode
}

/**
 * One generated job.
 *
 * @since 0.2.0
 * @category models
 */
export interface WorkloadJob {
  /** Its position in {@link Workload.jobs} (handy as a payload field). */
  readonly index: number
  /** Its concurrency declaration, or `null` for a job without a key. */
  readonly concurrency: KeyDeclaration | null
  /** How long its handler runs (virtual milliseconds, under `TestClock`). */
  readonly durationMs: number
  /** How its handler ends. */
  readonly result: Result
  /** When it is enqueued, in virtual milliseconds after the run starts. */
  readonly arrivalMs: number
}

/**
 * A generated enqueue schedule: the keys in play and the jobs, in index order (not arrival order).
 *
 * @since 0.2.0
 * @category models
 */
export interface Workload {
  readonly keys: ReadonlyArray<KeyDeclaration>
  readonly jobs: ReadonlyArray<WorkloadJob>
}

/**
 * Options of {@link arbitrary}. Every field has a default.
 *
 * @since 0.2.0
 * @category models
 */
export interface WorkloadOptions {
  /** Keys in play: 1 to `maxKeys` (default 3). */
  readonly maxKeys?: number | undefined
  /** Largest limit of a key (default 3); 1 gives Mutex keys only. */
  readonly maxLimit?: number | undefined
  /** The modes a key may take (default both). */
  readonly modes?: ReadonlyArray<Mode> | undefined
  /** Whether some jobs have no key (default true). */
  readonly keyless?: boolean | undefined
  /** Number of jobs (default 1 to 10). */
  readonly minJobs?: number | undefined
  readonly maxJobs?: number | undefined
  /** The handler durations to pick from, in milliseconds (default 0, 10, 20, 50). */
  readonly durationsMs?: ReadonlyArray<number> | undefined
  /** Relative weights of the handler results (default succeed 8, fail 1, die 1; 0 turns one off). */
  readonly results?: { readonly succeed?: number; readonly fail?: number; readonly die?: number } | undefined
  /** Latest arrival offset in milliseconds (default 100; 0 enqueues everything at the start). */
  readonly maxArrivalMs?: number | undefined
}

/**
 * Key declarations: `key-0`, `key-1`, ... each with a limit in 1..`maxLimit` and a mode.
 *
 * @since 0.2.0
 * @category arbitraries
 */
export const keys = (options: WorkloadOptions = {}): fc.Arbitrary<ReadonlyArray<KeyDeclaration>> =>
  fc
    .array(
      fc.record({
        limit: fc.integer({ min: 1, max: Math.max(1, options.maxLimit ?? 3) }),
        mode: fc.constantFrom<Mode>(...(options.modes ?? ["Skip", "Wait"]))
      }),
      { minLength: 1, maxLength: Math.max(1, options.maxKeys ?? 3) }
    )
    .map((ks) => ks.map((k, i) => ({ key: `key-${i}`, limit: k.limit, mode: k.mode })))

/**
 * A handler result, by the weights of {@link WorkloadOptions.results}.
 *
 * @since 0.2.0
 * @category arbitraries
 */
export const result = (weights: WorkloadOptions["results"] = {}): fc.Arbitrary<Result> => {
  const entries = (["succeed", "fail", "die"] as const)
    .map((r) => ({ arbitrary: fc.constant<Result>(r), weight: weights[r] ?? (r === "succeed" ? 8 : 1) }))
    .filter((e) => e.weight > 0)
  return fc.oneof(...entries)
}

/**
 * Workloads: keys, then jobs that each pick a key (or none), a duration, a result and an arrival.
 * Shrinking removes jobs and keys and moves values toward the first choice (no key, the first
 * duration, succeed, arrival 0).
 *
 * @since 0.2.0
 * @category arbitraries
 */
export const arbitrary = (options: WorkloadOptions = {}): fc.Arbitrary<Workload> =>
  keys(options).chain((ks) =>
    fc
      .array(
        fc.record({
          key:
            options.keyless === false
              ? fc.integer({ min: 0, max: ks.length - 1 })
              : fc.option(fc.integer({ min: 0, max: ks.length - 1 }), { freq: 4, nil: null }),
          durationMs: fc.constantFrom(...(options.durationsMs ?? [0, 10, 20, 50])),
          result: result(options.results),
          arrivalMs: fc.integer({ min: 0, max: Math.max(0, options.maxArrivalMs ?? 100) })
        }),
        { minLength: options.minJobs ?? 1, maxLength: Math.max(options.minJobs ?? 1, options.maxJobs ?? 10) }
      )
      .map((jobs) => ({
        keys: ks,
        jobs: jobs.map((j, index) => ({
          index,
          concurrency: j.key === null ? null : ks[j.key]!,
          durationMs: j.durationMs,
          result: j.result,
          arrivalMs: j.arrivalMs
        }))
      }))
  )

/**
 * The enqueue-time parameters that carry a job's concurrency declaration (`withMutex` /
 * `withSemaphore`); empty parameters for a job without a key.
 *
 * @since 0.2.0
 * @category enqueue
 */
export const parameters = (job: WorkloadJob): JobParameters => {
  const c = job.concurrency
  if (c === null) return JobParameters.make()
  return c.limit === 1 ? JobParameters.make().withMutex(c.key, c.mode) : JobParameters.make().withSemaphore(c.key, c.limit, c.mode)
}
