/**
 * Contracts: the job and message types, with their payload schema and declared policy.
 *
 * @since 0.1.0
 */
import * as Result from "effect/Result"
import type * as Schema from "effect/Schema"
import * as Describe from "../error/Describe.js"
import * as InvalidArgument from "../error/InvalidArgument.js"
import * as Declaration from "../policy/Declaration.js"
import type { Policies } from "../policy/PolicyFamily.js"
import * as Priority from "./Priority.js"
import * as Retention from "./Retention.js"

/** Options of a contract. A contract may carry any declaration, including a `Total` timeout. */
export interface ContractOptions {
  readonly policy?: ReadonlyArray<Declaration.Declaration>
  /**
   * How long this type's finished jobs are kept, overriding the worker's `retention` for the states it
   * names (see `Retention.RetentionOverride`); checked at construction (`InvalidArgument`).
   */
  readonly retention?: Retention.RetentionOverride | undefined
  /**
   * The default priority of this type's jobs: an integer in [-32768, 32767], higher runs first (a
   * registered handler's `priority` and `JobParameters.withPriority` win over it); checked at
   * construction (`InvalidArgument`).
   *
   * @since 1.1.0
   */
  readonly priority?: number | undefined
}

interface ContractBase<Tag extends string, Name extends string, A, I> {
  readonly _tag: Tag
  readonly name: Name
  readonly schema: Schema.Codec<A, I>
  /** The declared policy, one value per family (validated at construction). */
  readonly policies: Policies
  /** The retention override of this type's finished jobs, if any. */
  readonly retention?: Retention.RetentionOverride | undefined
  /** The declared default priority of this type's jobs, if any. */
  readonly priority?: number | undefined
}

/** A job type: enqueued, run by exactly one handler. */
export interface JobContract<Name extends string = string, A = any, I = any> extends ContractBase<"JobContract", Name, A, I> {}

/** A message type: published once, routed to every registered handler as one child job each. */
export interface MessageContract<Name extends string = string, A = any, I = any> extends ContractBase<"MessageContract", Name, A, I> {}

/** A plain in-memory request: answered in-process, never persisted — so it carries no policy. */
export interface RequestContract<Name extends string = string, A = any, I = any> {
  readonly _tag: "RequestContract"
  readonly name: Name
  readonly schema: Schema.Codec<A, I>
}

/** Any persisted contract. */
export type AnyContract = JobContract | MessageContract

/** The contract's retention override, checked (throws `InvalidArgument`), as a field to spread. */
const retentionOf = (entry: string, options?: ContractOptions): { readonly retention?: Retention.RetentionOverride } =>
  options?.retention === undefined
    ? {}
    : { retention: Result.getOrThrowWith(Retention.checkOverride(entry, options.retention), (e) => e) }

const policiesOf = (site: string, options?: ContractOptions): Policies =>
  Result.getOrThrowWith(Declaration.collect(site, options?.policy ?? []), (e) => e)

/** A contract's name is the job type stored on every row: it must be storable and found again. */
const checkName = (entry: string, name: string): void => {
  const rule = InvalidArgument.nameRule(name)
  if (rule !== undefined) throw InvalidArgument.make(`${entry}(${Describe.show(name, 24)}, …)`, "name", name, rule)
}

/**
 * Declares a job contract. Throws `InvalidPolicy` when its policy list is invalid, and
 * `InvalidArgument` when `name` is empty or cannot be stored (a NUL, an unpaired surrogate), its
 * `retention` cannot be honoured, or its `priority` is not an integer in [-32768, 32767].
 *
 * @example
 * const SendEmail = Contract.job("SendEmail", Schema.Struct({ to: Schema.String }))
 */
export const job = <const Name extends string, A, I>(
  name: Name,
  schema: Schema.Codec<A, I>,
  options?: ContractOptions
): JobContract<Name, A, I> => {
  checkName("Contract.job", name)
  return {
    _tag: "JobContract",
    name,
    schema,
    policies: policiesOf(`contract '${name}'`, options),
    ...retentionOf(`Contract.job(${name})`, options),
    ...Priority.declared(`Contract.job(${name})`, options?.priority)
  }
}

/** Declares a message contract. Throws `InvalidPolicy` when its policy list is invalid. */
export const message = <const Name extends string, A, I>(
  name: Name,
  schema: Schema.Codec<A, I>,
  options?: ContractOptions
): MessageContract<Name, A, I> => {
  checkName("Contract.message", name)
  return {
    _tag: "MessageContract",
    name,
    schema,
    policies: policiesOf(`contract '${name}'`, options),
    ...retentionOf(`Contract.message(${name})`, options),
    ...Priority.declared(`Contract.message(${name})`, options?.priority)
  }
}

/** Declares an in-memory request contract (no options: a request has no policy). */
export const request = <const Name extends string, A, I>(name: Name, schema: Schema.Codec<A, I>): RequestContract<Name, A, I> => ({
  _tag: "RequestContract",
  name,
  schema
})
