/**
 * Handlers: the code that runs a contract, built by typed constructors.
 *
 * Only job and message handlers accept a `policy` option. The options types of stream and request
 * handlers have no `policy` field, so a policy placed there fails to compile; a handler assembled
 * around these constructors is checked when its job runs and fails that job, not the process.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type * as Stream from "effect/Stream"
import * as Describe from "../error/Describe.js"
import * as InvalidArgument from "../error/InvalidArgument.js"
import * as Declaration from "../policy/Declaration.js"
import type { Policies } from "../policy/PolicyFamily.js"
import type { JobContract, MessageContract, RequestContract } from "./Contract.js"
import * as Priority from "./Priority.js"

/** The concurrency slot an attempt holds: its key, its index and the provider's fencing token. */
export interface SlotInfo {
  readonly key: string
  readonly index: number
  readonly fence?: bigint | undefined
}


/** What a handler learns about the attempt running it. */
export interface AttemptInfo {
  readonly jobId: string
  readonly type: string
  readonly attempt: number
  /**
   * The concurrency slot this attempt holds, for a keyed job: key, slot index and the fencing token
   * (`fence`) to hand to resources that must refuse a stale holder.
   */
  readonly slot?: SlotInfo | undefined
}

/** Options of job and message handlers. `Total` timeouts are not accepted here. */
export interface HandlerOptions {
  readonly policy?: ReadonlyArray<Declaration.HandlerDeclaration>
  /**
   * The default priority of the jobs this handler runs: an integer in [-32768, 32767], higher runs
   * first. It wins over the contract's and loses to `JobParameters.withPriority`, and is read at
   * publish from the handler registered in the publishing process (a process that publishes without
   * registering the handler uses the contract's). Checked at construction (`InvalidArgument`).
   *
   * @since 1.1.0
   */
  readonly priority?: number | undefined
}

/** Runs one job of contract `C`. */
export interface JobHandler<A = any, E = any, R = any> {
  readonly _tag: "JobHandler"
  readonly contract: JobContract<string, A>
  readonly name: string
  readonly policies: Policies
  /** The declared default priority of its jobs, if any (see `HandlerOptions.priority`). */
  readonly priority?: number | undefined
  readonly run: (payload: A, attempt: AttemptInfo) => Effect.Effect<void, E, R>
}

/** Runs this handler's child of every published message of contract `C`. */
export interface MessageHandler<A = any, E = any, R = any> {
  readonly _tag: "MessageHandler"
  readonly contract: MessageContract<string, A>
  readonly name: string
  readonly policies: Policies
  /** The declared default priority of its jobs, if any (see `HandlerOptions.priority`). */
  readonly priority?: number | undefined
  readonly run: (payload: A, attempt: AttemptInfo) => Effect.Effect<void, E, R>
}

/** Runs a job as a stream drained to completion. Stream handlers take no policy (spec #242). */
export interface StreamHandler<A = any, E = any, R = any> {
  readonly _tag: "StreamHandler"
  readonly contract: JobContract<string, A>
  readonly name: string
  readonly run: (payload: A, attempt: AttemptInfo) => Stream.Stream<unknown, E, R>
}

/** Answers an in-memory request in-process. Request handlers take no policy. */
export interface RequestHandler<A = any, B = any, E = any, R = any> {
  readonly _tag: "RequestHandler"
  readonly contract: RequestContract<string, A>
  readonly name: string
  readonly run: (request: A) => Effect.Effect<B, E, R>
}

/** Any handler the registry accepts. */
export type AnyHandler = JobHandler | MessageHandler | StreamHandler | RequestHandler | import("./Saga.js").SagaHandler

/** The requirements of a handler. */
export type Requirements<H> = H extends { readonly run: (...args: any) => Effect.Effect<any, any, infer R> }
  ? R
  : H extends { readonly run: (...args: any) => Stream.Stream<any, any, infer R> }
    ? R
    : never

const policiesOf = (site: string, options?: HandlerOptions): Policies =>
  Result.getOrThrowWith(Declaration.collect(site, options?.policy ?? []), (e) => e)

/**
 * A job handler. Its declared policy wins over the contract's, family by family.
 *
 * @example
 * const send = Handler.job(SendEmail, ({ to }) => Effect.log(`mail to ${to}`), { policy: [Mutex("smtp")] })
 */
export const job = <A, E, R>(
  contract: JobContract<string, A>,
  run: (payload: A, attempt: AttemptInfo) => Effect.Effect<void, E, R>,
  options?: HandlerOptions
): JobHandler<A, E, R> => ({
  _tag: "JobHandler",
  contract,
  name: contract.name,
  policies: policiesOf(`handler of '${contract.name}'`, options),
  ...Priority.declared(`Handler.job(${contract.name})`, options?.priority),
  run
})

/**
 * A message handler named `name` (unique per message contract). The name is stored on each child job:
 * throws `InvalidArgument` when it is empty or cannot be stored (a NUL, an unpaired surrogate).
 */
export const message = <A, E, R>(
  contract: MessageContract<string, A>,
  name: string,
  run: (payload: A, attempt: AttemptInfo) => Effect.Effect<void, E, R>,
  options?: HandlerOptions
): MessageHandler<A, E, R> => {
  const rule = InvalidArgument.nameRule(name)
  if (rule !== undefined) throw InvalidArgument.make(`Handler.message(${contract.name}, ${Describe.show(name, 24)}, …)`, "name", name, rule)
  return {
    _tag: "MessageHandler",
    contract,
    name,
    policies: policiesOf(`handler '${name}' of '${contract.name}'`, options),
    ...Priority.declared(`Handler.message(${contract.name}, ${name})`, options?.priority),
    run
  }
}

/** A stream handler: the job succeeds when the stream completes. No `policy` option exists. */
export const stream = <A, E, R>(
  contract: JobContract<string, A>,
  run: (payload: A, attempt: AttemptInfo) => Stream.Stream<unknown, E, R>
): StreamHandler<A, E, R> => ({ _tag: "StreamHandler", contract, name: contract.name, run })

/** An in-memory request handler. No `policy` option exists. */
export const request = <A, B, E, R>(
  contract: RequestContract<string, A>,
  run: (request: A) => Effect.Effect<B, E, R>
): RequestHandler<A, B, E, R> => ({ _tag: "RequestHandler", contract, name: contract.name, run })

/**
 * A new job handler built from `base` with a new body. Declarations are not inherited: the derived
 * handler carries only the `policy` given here.
 */
export const derive = <A, E, R>(
  base: JobHandler<A, any, any>,
  run: (payload: A, attempt: AttemptInfo) => Effect.Effect<void, E, R>,
  options?: HandlerOptions
): JobHandler<A, E, R> => job(base.contract, run, options)
