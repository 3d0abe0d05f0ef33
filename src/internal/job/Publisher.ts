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
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Schema from "effect/Schema"
import * as JobMetadata from "../policy/JobMetadata.js"
import type { InvalidPolicy } from "../policy/InvalidPolicy.js"
import { type ConcurrencyPolicy, TimeoutPolicy } from "../policy/PolicyValues.js"
import { JobStore } from "../store/JobStore.js"
import type { StoreError } from "../store/StoreError.js"
import type { JobContract, MessageContract } from "./Contract.js"
import * as InvalidArgument from "../error/InvalidArgument.js"
import type { InvalidPayload } from "./errors.js"
import * as PayloadCodec from "./PayloadCodec.js"
import type { AnyHandler } from "./Handler.js"
import * as JobId from "./JobId.js"
import { JobParameters } from "./JobParameters.js"
import * as Telemetry from "../observability/Telemetry.js"
import { Registry } from "./Registry.js"

/** Errors of publishing. */
export type PublishError = InvalidPayload | InvalidPolicy | InvalidArgument.InvalidArgument | StoreError

/** The publisher service. */
export interface PublisherService {
  /** Enqueues a job to run as soon as a worker is free; returns its id. */
  readonly enqueue: <A, I>(contract: JobContract<string, A, I>, payload: A, params?: JobParameters) => Effect.Effect<string, PublishError>
  /** Schedules a job to run at `at`; returns its id. */
  readonly schedule: <A, I>(contract: JobContract<string, A, I>, payload: A, at: Date, params?: JobParameters) => Effect.Effect<string, PublishError>
  /** Publishes a message: one child job per registered handler; returns the child ids. */
  readonly publish: <A, I>(contract: MessageContract<string, A, I>, payload: A, params?: JobParameters) => Effect.Effect<ReadonlyArray<string>, PublishError>
}

/** The publisher tag. */
export class Publisher extends Context.Tag("warp/Publisher")<Publisher, PublisherService>() {}

/**
 * A Fifo-mode concurrency policy of the handler this process has registered for the row (it would win
 * resolution), else of the contract — carried onto the row at publish, so that the store orders the
 * job by its key from its first fetch on. The carried entry only informs the fetch: resolution still
 * reads the live handler and contract (a `handler` entry is never read back), and the first attempt
 * stamps the winner. Nothing is carried for a registered saga handler (policy-exempt).
 */
export const fifoCarry = (
  contract: JobContract | MessageContract,
  handler: AnyHandler | undefined
): { readonly source: JobMetadata.Source; readonly value: ConcurrencyPolicy } | undefined => {
  if (handler !== undefined && handler._tag !== "JobHandler" && handler._tag !== "MessageHandler") return undefined
  const declared = handler?.policies.concurrency
  if (declared !== undefined) return declared.mode === "Fifo" ? { source: "handler", value: declared } : undefined
  const own = contract.policies.concurrency
  return own?.mode === "Fifo" ? { source: "contract", value: own } : undefined
}

/**
 * The metadata stored at publish: explicit entries, a contract `Total` timeout's deadline, and (when no
 * concurrency entry is explicit) a Fifo-mode concurrency policy of `handler` or the contract.
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
const encodePayload = <A, I>(entry: string, contract: { readonly name: string; readonly schema: Schema.Schema<A, I> }, payload: A) =>
  Effect.suspend(() => PayloadCodec.encode(entry, contract, payload))

/** A producer span (`warp.enqueue` / `warp.publish`) with the job type and the id(s) written. */
const traced =
  (name: string, type: string) =>
  <A extends string | ReadonlyArray<string>, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    self.pipe(
      Effect.tap((ids) => Effect.annotateCurrentSpan(Telemetry.attributes.jobId, typeof ids === "string" ? ids : ids.join(","))),
      Effect.withSpan(name, { kind: "producer", attributes: { [Telemetry.attributes.jobType]: type } })
    )

/** Builds the publisher on the `JobStore` and `Registry` in context. */
export const make = Effect.gen(function* () {
  const store = yield* JobStore
  const registry = yield* Registry

  const insertOne = <A, I>(contract: JobContract<string, A, I>, payload: A, at: Date | undefined, params: JobParameters) =>
    Effect.gen(function* () {
      if (params.error !== undefined) return yield* Effect.fail(params.error)
      if (at !== undefined && !(at instanceof Date && Number.isFinite(at.getTime()))) {
        return yield* Effect.fail(InvalidArgument.make("Publisher.schedule", "at", at, "must be a valid Date"))
      }
      const encoded = yield* encodePayload(at === undefined ? "Publisher.enqueue" : "Publisher.schedule", contract, payload)
      const now = new Date(yield* Clock.currentTimeMillis)
      const id = JobId.make()
      const scheduled = at !== undefined && at.getTime() > now.getTime()
      yield* store.insert([
        {
          id,
          type: contract.name,
          handler: null,
          payload: encoded,
          state: scheduled ? "Scheduled" : "Enqueued",
          scheduleTime: scheduled ? at : now,
          metadata: JobMetadata.encode(
            publishMetadata(contract, params, now, Option.getOrUndefined(registry.lookup(contract.name, null))?.handler)
          )
        }
      ])
      return id
    })

  const service: PublisherService = {
    enqueue: (contract, payload, params = JobParameters.make()) =>
      insertOne(contract, payload, undefined, params).pipe(traced(Telemetry.spans.enqueue, contract.name)),
    schedule: (contract, payload, at, params = JobParameters.make()) =>
      insertOne(contract, payload, at, params).pipe(traced(Telemetry.spans.enqueue, contract.name)),
    publish: (contract, payload, params = JobParameters.make()) =>
      Effect.gen(function* () {
        if (params.error !== undefined) return yield* Effect.fail(params.error)
        const encoded = yield* encodePayload("Publisher.publish", contract, payload)
        const now = new Date(yield* Clock.currentTimeMillis)
        const rows = registry.messageHandlers(contract.name).map((r) => ({
          id: JobId.make(),
          type: contract.name,
          handler: r.handler.name,
          payload: encoded,
          state: "Enqueued" as const,
          scheduleTime: now,
          metadata: JobMetadata.encode(publishMetadata(contract, params, now, r.handler))
        }))
        yield* store.insert(rows)
        return rows.map((r) => r.id)
      }).pipe(traced(Telemetry.spans.publish, contract.name))
  }
  return service
})

/** The publisher Layer. */
export const layer: Layer.Layer<Publisher, never, JobStore | Registry> = Layer.effect(Publisher, make)
