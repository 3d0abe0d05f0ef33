/**
 * The publisher: enqueue and schedule jobs, publish messages. Only explicit `JobParameters` (and a
 * contract's `Total` timeout deadline, which must exist before any handler is known, and a Fifo-mode
 * concurrency policy, which the store needs to order the job) is stored at publish; everything else is
 * resolved by the first attempt.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type * as Schema from "effect/Schema"
import * as JobMetadata from "../policy/JobMetadata.js"
import type { InvalidPolicy } from "../policy/InvalidPolicy.js"
import { type ConcurrencyPolicy, TimeoutPolicy } from "../policy/PolicyValues.js"
import { JobStore, type Submitted } from "../store/JobStore.js"
import type { StoreError } from "../store/StoreError.js"
import type { JobContract, MessageContract } from "../job/Contract.js"
import type { NewJob, NewJobKey } from "../job/Job.js"
import * as InvalidArgument from "../error/InvalidArgument.js"
import type { InvalidPayload } from "../job/errors.js"
import * as PayloadCodec from "../job/PayloadCodec.js"
import type { AnyHandler } from "../job/Handler.js"
import * as JobId from "../job/JobId.js"
import { JobParameters } from "./JobParameters.js"
import * as Telemetry from "../observability/Telemetry.js"
import { Registry } from "../job/Registry.js"

export type { Submitted }

/** Errors of publishing. */
export type PublishError = InvalidPayload | InvalidPolicy | InvalidArgument.InvalidArgument | StoreError

/**
 * The parameters of a batch: one `JobParameters` for every item, or a function giving each item its
 * own (build them on a shared base to have both: `(p) => base.withMutex(p.key)`).
 *
 * @since 0.2.0
 * @category models
 */
export type BatchParameters<A> = JobParameters | ((payload: A, index: number) => JobParameters)

/**
 * An item of a batch that cannot be published: its payload does not match the contract's schema, or
 * its parameters are invalid. Nothing of the batch was written.
 *
 * @since 0.2.0
 * @category errors
 */
export class InvalidBatchItem extends Data.TaggedError("InvalidBatchItem")<{
  /** The contract's name. */
  readonly type: string
  /** The item's position in the batch (0-based). */
  readonly index: number
  /** Why the item was rejected. */
  readonly cause: InvalidPayload | InvalidPolicy | InvalidArgument.InvalidArgument
  readonly message: string
}> {}

/**
 * Errors of publishing a batch: an invalid item (named by its index), the batch's own invalid
 * parameters, or the store's error (nothing written).
 *
 * @since 0.2.0
 * @category errors
 */
export type BatchPublishError = InvalidBatchItem | InvalidPolicy | InvalidArgument.InvalidArgument | StoreError

/**
 * The publisher service. Every operation is one write of the store (a batch: of each of its chunks, in
 * one transaction); on the PostgreSQL store it joins the caller's `SqlClient.withTransaction`, so the
 * jobs become visible to workers only when that transaction commits, and a rollback or an interruption
 * publishes nothing.
 */
export interface PublisherService {
  /** Enqueues a job to run as soon as a worker is free; returns its id. */
  readonly enqueue: <A, I>(contract: JobContract<string, A, I>, payload: A, params?: JobParameters) => Effect.Effect<string, PublishError>
  /** Schedules a job to run at `at`; returns its id. */
  readonly schedule: <A, I>(contract: JobContract<string, A, I>, payload: A, at: Date, params?: JobParameters) => Effect.Effect<string, PublishError>
  /**
   * Enqueues a job (at `at`: schedules it) and says what happened (since 1.1.0): `Created`, or, with a
   * job key (`JobParameters.withJobKey` / `withThrottle` / `withDebounce`), `Replaced` or `Joined` the job
   * that holds the key; `id` is the job holding the key.
   */
  readonly submit: <A, I>(contract: JobContract<string, A, I>, payload: A, params?: JobParameters, at?: Date) => Effect.Effect<Submitted, PublishError>
  /**
   * Enqueues many jobs (at `at`: schedules them), saying what happened to each, in order (since 1.1.0).
   * Items with the same job key resolve in order: a later one replaces or joins the earlier one's job.
   */
  readonly submitMany: <A, I>(
    contract: JobContract<string, A, I>,
    payloads: Iterable<A>,
    params?: BatchParameters<A>,
    at?: Date | ((payload: A, index: number) => Date)
  ) => Effect.Effect<ReadonlyArray<Submitted>, BatchPublishError>
  /** Publishes a message: one child job per registered handler; returns the child ids. */
  readonly publish: <A, I>(contract: MessageContract<string, A, I>, payload: A, params?: JobParameters) => Effect.Effect<ReadonlyArray<string>, PublishError>
  /**
   * Enqueues many jobs of one contract in one call; returns their ids in the order of `payloads`.
   * Every payload is encoded and every item's parameters checked before anything is written: an
   * invalid item fails the whole batch with {@link InvalidBatchItem}. Metadata and stamping are those
   * of `enqueue`, item by item.
   *
   * @since 0.2.0
   */
  readonly enqueueMany: <A, I>(
    contract: JobContract<string, A, I>,
    payloads: Iterable<A>,
    params?: BatchParameters<A>
  ) => Effect.Effect<ReadonlyArray<string>, BatchPublishError>
  /**
   * Schedules many jobs of one contract to run at `at` (an item's own time if a function); returns
   * their ids in order. Validation as {@link PublisherService.enqueueMany}.
   *
   * @since 0.2.0
   */
  readonly scheduleMany: <A, I>(
    contract: JobContract<string, A, I>,
    payloads: Iterable<A>,
    at: Date | ((payload: A, index: number) => Date),
    params?: BatchParameters<A>
  ) => Effect.Effect<ReadonlyArray<string>, BatchPublishError>
  /**
   * Publishes many messages of one contract; returns each message's child ids, in order. Validation
   * as {@link PublisherService.enqueueMany}.
   *
   * @since 0.2.0
   */
  readonly publishMany: <A, I>(
    contract: MessageContract<string, A, I>,
    payloads: Iterable<A>,
    params?: BatchParameters<A>
  ) => Effect.Effect<ReadonlyArray<ReadonlyArray<string>>, BatchPublishError>
}

/** The publisher tag. */
export class Publisher extends Context.Service<Publisher, PublisherService>()("warp/Publisher") {}

/**
 * A Fifo-mode or weighted (fair-share) concurrency policy of the handler this process has registered
 * for the row (it would win resolution), else of the contract — carried onto the row at publish, so
 * that the store orders the job by its key (Fifo line, or fair-share tag) from its first fetch on. The carried entry only informs the fetch: resolution still
 * reads the live handler and contract (a `handler` entry is never read back), and the first attempt
 * stamps the winner. Nothing is carried for a registered saga handler (policy-exempt).
 */
export const fifoCarry = (
  contract: JobContract | MessageContract,
  handler: AnyHandler | undefined
): { readonly source: JobMetadata.Source; readonly value: ConcurrencyPolicy } | undefined => {
  if (handler !== undefined && handler._tag !== "JobHandler" && handler._tag !== "MessageHandler") return undefined
  const declared = handler?.policies.concurrency
  const ordered = (p: ConcurrencyPolicy) => p.mode === "Fifo" || p.weight !== undefined
  if (declared !== undefined) return ordered(declared) ? { source: "handler", value: declared } : undefined
  const own = contract.policies.concurrency
  return own !== undefined && ordered(own) ? { source: "contract", value: own } : undefined
}

/**
 * A job's priority, resolved at publish (the row's claim orders by it): the enqueue's
 * (`JobParameters.withPriority`) > the handler this process has registered for the row > the
 * contract's > 0. Saga, stream and request handlers declare none.
 */
export const priorityOf = (contract: JobContract | MessageContract, params: JobParameters, handler: AnyHandler | undefined): number =>
  params.priority ??
  (handler !== undefined && (handler._tag === "JobHandler" || handler._tag === "MessageHandler") ? handler.priority : undefined) ??
  contract.priority ??
  0

/**
 * The metadata stored at publish: explicit entries, a contract `Total` timeout's deadline, and (when no
 * concurrency entry is explicit) a Fifo-mode or weighted concurrency policy of `handler` or the contract.
 */
export const publishMetadata = (
  contract: JobContract | MessageContract,
  params: JobParameters,
  now: Date,
  handler?: AnyHandler
): JobMetadata.JobMetadata => {
  const policies: Record<string, { source: JobMetadata.Source; value: unknown }> = {}
  for (const [family, d] of params.entries) policies[family] = { source: "enqueue", value: d.value }
  if (policies.concurrency === undefined) {
    const fifo = fifoCarry(contract, handler)
    if (fifo !== undefined) policies.concurrency = fifo
  }
  const contractTimeout = contract.policies.timeout
  if (policies.timeout === undefined && contractTimeout?.scope === "Total") {
    policies.timeout = { source: "contract", value: contractTimeout }
  }
  const t = policies.timeout?.value as TimeoutPolicy | undefined
  if (t !== undefined && t.scope === "Total" && t.deadline === undefined) {
    policies.timeout = {
      source: policies.timeout!.source,
      value: new TimeoutPolicy({ ...t, deadline: new Date(now.getTime() + t.durationMs).toISOString() })
    }
  }
  return JobMetadata.fromEntries(policies as JobMetadata.PolicyEntries)
}

/** The payload as stored: encoded, and checked to come back unchanged (see `PayloadCodec`). */
const encodePayload = <A, I>(entry: string, contract: { readonly name: string; readonly schema: Schema.Codec<A, I> }, payload: A) =>
  Effect.suspend(() => Effect.fromResult(PayloadCodec.encode(entry, contract, payload)))

/** A producer span (`warp.enqueue` / `warp.publish`) with the job type and the id(s) written. */
const traced =
  (name: string, type: string) =>
  <A extends string | ReadonlyArray<string> | Submitted, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    self.pipe(
      Effect.tap((ids) =>
        Effect.annotateCurrentSpan(Telemetry.attributes.jobId, typeof ids === "string" ? ids : Array.isArray(ids) ? ids.join(",") : (ids as Submitted).id)
      ),
      Effect.withSpan(name, { kind: "producer", attributes: { [Telemetry.attributes.jobType]: type } }, { captureStackTrace: false })
    )

/** A producer span of a batch, with the job type and the number of jobs written. */
const tracedBatch =
  (name: string, type: string) =>
  <A extends ReadonlyArray<unknown>, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    self.pipe(
      Effect.tap((ids) => Effect.annotateCurrentSpan("warp.batch.size", ids.length)),
      Effect.withSpan(name, { kind: "producer", attributes: { [Telemetry.attributes.jobType]: type } }, { captureStackTrace: false })
    )

/** One checked item of a batch: the encoded payload and its parameters. */
interface BatchItem {
  readonly encoded: unknown
  readonly params: JobParameters
}

/**
 * Encodes every payload and checks every item's parameters, before anything is written; fails on the
 * first invalid item, naming it.
 */
const checkBatch = <A, I>(
  entry: string,
  contract: JobContract<string, A, I> | MessageContract<string, A, I>,
  payloads: ReadonlyArray<A>,
  params: BatchParameters<A>
): Effect.Effect<ReadonlyArray<BatchItem>, BatchPublishError> =>
  Effect.suspend((): Effect.Effect<ReadonlyArray<BatchItem>, BatchPublishError> => {
    if (typeof params !== "function" && params.error !== undefined) return Effect.fail(params.error)
    const invalid = (index: number, cause: InvalidPayload | InvalidPolicy | InvalidArgument.InvalidArgument) =>
      Effect.fail(new InvalidBatchItem({ type: contract.name, index, cause, message: `Item ${index} of ${contract.name}: ${cause.message}` }))
    // a plain loop over the codec's Result: a bulk of 10^5 payloads is checked without an effect per item
    const items = new Array<BatchItem>(payloads.length)
    for (let index = 0; index < payloads.length; index++) {
      const payload = payloads[index]!
      const own = typeof params === "function" ? params(payload, index) : params
      if (own.error !== undefined) return invalid(index, own.error)
      const encoded = PayloadCodec.encode(entry, contract, payload)
      if (Result.isFailure(encoded)) return invalid(index, encoded.failure)
      items[index] = { encoded: encoded.success, params: own }
    }
    return Effect.succeed(items)
  })

/**
 * The encoded metadata of a batch's items, computed once per distinct `JobParameters` (a batch with
 * one parameters value shares one metadata object, which the store sends once).
 */
const metadataOf = (contract: JobContract | MessageContract, now: Date, handler: AnyHandler | undefined) => {
  const cache = new Map<JobParameters, unknown>()
  return (params: JobParameters): unknown => {
    let m = cache.get(params)
    if (m === undefined) {
      m = JobMetadata.encode(publishMetadata(contract, params, now, handler))
      cache.set(params, m)
    }
    return m
  }
}

/** A message contract's publish with a job key: refused (job keys apply to jobs). */
const noKey = (entry: string, params: JobParameters): InvalidArgument.InvalidArgument | undefined =>
  params.jobKey === undefined ? undefined : InvalidArgument.make(entry, "params", params.jobKey.key, "must not carry a job key (job keys apply to jobs)")

/** The row's job key, or undefined. */
const rowKey = (params: JobParameters): NewJobKey | undefined => {
  const k = params.jobKey
  return k === undefined ? undefined : { key: k.key, mode: k.mode, hold: k.hold, ...(k.windowMs === undefined ? {} : { windowMs: k.windowMs }) }
}

/** A debounce's own time: `now` + its delay (undefined without a debounce). */
const debounceAt = (params: JobParameters, now: Date): Date | undefined =>
  params.jobKey?.delayMs === undefined ? undefined : new Date(now.getTime() + params.jobKey.delayMs)

/** A debounce sets the job's time: a schedule's own `at` with it is refused. */
const debounceWithAt = (entry: string, at: unknown): InvalidArgument.InvalidArgument =>
  InvalidArgument.make(entry, "at", at, "must be absent with withDebounce (the debounce sets the time)")

const idOf = (s: Submitted): string => s.id
const idsOf = (s: ReadonlyArray<Submitted>): ReadonlyArray<string> => s.map(idOf)

/** Builds the publisher on the `JobStore` and `Registry` in context. */
export const make = Effect.gen(function* () {
  const store = yield* JobStore
  const registry = yield* Registry

  const insertOne = <A, I>(contract: JobContract<string, A, I>, payload: A, given: Date | undefined, params: JobParameters, entry?: string) =>
    Effect.gen(function* () {
      const name = entry ?? (given === undefined ? "Publisher.enqueue" : "Publisher.schedule")
      if (params.error !== undefined) return yield* Effect.fail(params.error)
      if (given !== undefined && !(given instanceof Date && Number.isFinite(given.getTime()))) {
        return yield* Effect.fail(InvalidArgument.make(name, "at", given, "must be a valid Date"))
      }
      if (given !== undefined && params.jobKey?.kind === "debounce") return yield* Effect.fail(debounceWithAt(name, given))
      const encoded = yield* encodePayload(name, contract, payload)
      const now = new Date(yield* Clock.currentTimeMillis)
      const id = JobId.make()
      const at = given ?? debounceAt(params, now)
      const scheduled = at !== undefined && at.getTime() > now.getTime()
      const handler = Option.getOrUndefined(registry.lookup(contract.name, null))?.handler
      const jobKey = rowKey(params)
      const [submitted] = yield* store.insert([
        {
          id,
          type: contract.name,
          handler: null,
          payload: encoded,
          state: scheduled ? "Scheduled" : "Enqueued",
          scheduleTime: scheduled ? at : now,
          metadata: JobMetadata.encode(publishMetadata(contract, params, now, handler)),
          priority: priorityOf(contract, params, handler),
          ...(jobKey === undefined ? {} : { jobKey })
        }
      ])
      return submitted ?? ({ _tag: "Created", id } as const)
    })

  const insertMany = <A, I>(
    contract: JobContract<string, A, I>,
    payloads: Iterable<A>,
    at: Date | ((payload: A, index: number) => Date) | undefined,
    params: BatchParameters<A>,
    name?: string
  ) =>
    Effect.gen(function* () {
      const list = Array.from(payloads)
      const entry = name ?? (at === undefined ? "Publisher.enqueueMany" : "Publisher.scheduleMany")
      const items = yield* checkBatch(entry, contract, list, params)
      // every item's date is checked before anything is written, like its payload
      const dates = list.map((payload, i) => (typeof at === "function" ? at(payload, i) : at))
      const badDate = dates.findIndex((d) => d !== undefined && !(d instanceof Date && Number.isFinite(d.getTime())))
      if (badDate >= 0) {
        const cause = InvalidArgument.make(entry, "at", dates[badDate], "must be a valid Date")
        return yield* Effect.fail(
          new InvalidBatchItem({ type: contract.name, index: badDate, cause, message: `Item ${badDate} of ${contract.name}: ${cause.message}` })
        )
      }
      const debounced = items.findIndex((item, i) => item.params.jobKey?.kind === "debounce" && dates[i] !== undefined)
      if (debounced >= 0) {
        const cause = debounceWithAt(entry, dates[debounced])
        return yield* Effect.fail(
          new InvalidBatchItem({ type: contract.name, index: debounced, cause, message: `Item ${debounced} of ${contract.name}: ${cause.message}` })
        )
      }
      const now = new Date(yield* Clock.currentTimeMillis)
      const handler = Option.getOrUndefined(registry.lookup(contract.name, null))?.handler
      const metadata = metadataOf(contract, now, handler)
      const rows = items.map((item, i): NewJob => {
        const when = dates[i] ?? debounceAt(item.params, now)
        const scheduled = when !== undefined && when.getTime() > now.getTime()
        const jobKey = rowKey(item.params)
        return {
          id: JobId.make(),
          type: contract.name,
          handler: null,
          payload: item.encoded,
          state: scheduled ? ("Scheduled" as const) : ("Enqueued" as const),
          scheduleTime: scheduled ? when : now,
          metadata: metadata(item.params),
          priority: priorityOf(contract, item.params, handler),
          ...(jobKey === undefined ? {} : { jobKey })
        }
      })
      return yield* store.insert(rows)
    })

  const service: PublisherService = {
    enqueue: (contract, payload, params = JobParameters.make()) =>
      insertOne(contract, payload, undefined, params).pipe(Effect.map(idOf), traced(Telemetry.spans.enqueue, contract.name)),
    schedule: (contract, payload, at, params = JobParameters.make()) =>
      insertOne(contract, payload, at, params).pipe(Effect.map(idOf), traced(Telemetry.spans.enqueue, contract.name)),
    submit: (contract, payload, params = JobParameters.make(), at) =>
      insertOne(contract, payload, at, params, "Publisher.submit").pipe(traced(Telemetry.spans.enqueue, contract.name)),
    submitMany: (contract, payloads, params = JobParameters.make(), at) =>
      insertMany(contract, payloads, at, params, "Publisher.submitMany").pipe(tracedBatch(Telemetry.spans.enqueue, contract.name)),
    publish: (contract, payload, params = JobParameters.make()) =>
      Effect.gen(function* () {
        if (params.error !== undefined) return yield* Effect.fail(params.error)
        const keyed = noKey("Publisher.publish", params)
        if (keyed !== undefined) return yield* Effect.fail(keyed)
        const encoded = yield* encodePayload("Publisher.publish", contract, payload)
        const now = new Date(yield* Clock.currentTimeMillis)
        const rows = registry.messageHandlers(contract.name).map((r) => ({
          id: JobId.make(),
          type: contract.name,
          handler: r.handler.name,
          payload: encoded,
          state: "Enqueued" as const,
          scheduleTime: now,
          metadata: JobMetadata.encode(publishMetadata(contract, params, now, r.handler)),
          priority: priorityOf(contract, params, r.handler)
        }))
        yield* store.insert(rows)
        return rows.map((r) => r.id)
      }).pipe(traced(Telemetry.spans.publish, contract.name)),
    enqueueMany: (contract, payloads, params = JobParameters.make()) =>
      insertMany(contract, payloads, undefined, params).pipe(Effect.map(idsOf), tracedBatch(Telemetry.spans.enqueue, contract.name)),
    scheduleMany: (contract, payloads, at, params = JobParameters.make()) =>
      insertMany(contract, payloads, at, params).pipe(Effect.map(idsOf), tracedBatch(Telemetry.spans.enqueue, contract.name)),
    publishMany: (contract, payloads, params = JobParameters.make()) =>
      Effect.gen(function* () {
        const items = yield* checkBatch("Publisher.publishMany", contract, Array.from(payloads), params)
        const keyed = items.findIndex((item) => item.params.jobKey !== undefined)
        if (keyed >= 0) {
          const cause = noKey("Publisher.publishMany", items[keyed]!.params)!
          return yield* Effect.fail(
            typeof params === "function"
              ? new InvalidBatchItem({ type: contract.name, index: keyed, cause, message: `Item ${keyed} of ${contract.name}: ${cause.message}` })
              : cause
          )
        }
        const now = new Date(yield* Clock.currentTimeMillis)
        const handlers = registry
          .messageHandlers(contract.name)
          .map((r) => ({ name: r.handler.name, handler: r.handler, metadata: metadataOf(contract, now, r.handler) }))
        const children = items.map((item) =>
          handlers.map((h) => ({
            id: JobId.make(),
            type: contract.name,
            handler: h.name,
            payload: item.encoded,
            state: "Enqueued" as const,
            scheduleTime: now,
            metadata: h.metadata(item.params),
            priority: priorityOf(contract, item.params, h.handler)
          }))
        )
        yield* store.insert(children.flat())
        return children.map((rows) => rows.map((r) => r.id))
      }).pipe(tracedBatch(Telemetry.spans.publish, contract.name))
  }
  return service
})

/** The publisher Layer. */
export const layer: Layer.Layer<Publisher, never, JobStore | Registry> = Layer.effect(Publisher, make)
