/**
 * Concurrency limits computed from the job's payload (`Semaphore(key, (payload) => n)`).
 *
 * A declaration with a computed limit carries the function next to its persisted value (whose `limit`
 * is a placeholder that never reaches a row). `Declaration.collect` attaches the function to the
 * folded policies of the contract or handler; resolution calls it once, on the attempt that stamps,
 * validates the result like any declared limit, and stamps the number — so later attempts and the
 * claim statement only ever see a plain number. An invalid result (not an integer >= 1, NaN, a throw)
 * fails the job with a message naming the key and the value.
 *
 * @since 0.3.0
 */
import * as Result from "effect/Result"
import * as Describe from "../error/Describe.js"
import { type ConcurrencyPolicy, MAX_LIMIT } from "./PolicyValues.js"

/** A limit computed from the payload (the contract's decoded payload). */
export type LimitFrom<P = any> = (payload: P) => number

const attached = new WeakMap<object, LimitFrom<unknown>>()

/** Attaches the computed limit of `policies`' concurrency entry (done by `Declaration.collect`). */
export const attach = (policies: object, limitFrom: LimitFrom<unknown>): void => void attached.set(policies, limitFrom)

/** The computed limit attached to a folded policies object, if any. */
export const of = (policies: object): LimitFrom<unknown> | undefined => attached.get(policies)

/**
 * Computes the limit of `policy` for `payload`: the number, or why it is not a limit (the function
 * threw, or returned something other than an integer in 1..MAX_LIMIT).
 */
export const compute = (policy: ConcurrencyPolicy, limitFrom: LimitFrom<unknown>, payload: unknown): Result.Result<number, string> => {
  const site = `Semaphore('${policy.key}', <computed>)`
  let n: unknown
  try {
    n = limitFrom(payload)
  } catch (e) {
    return Result.fail(`${site}: computing the limit from the payload threw: ${e instanceof Error ? e.message : Describe.show(e)}`)
  }
  return typeof n === "number" && Number.isInteger(n) && n >= 1 && n <= MAX_LIMIT
    ? Result.succeed(n)
    : Result.fail(`${site}: the computed limit must be an integer >= 1 and at most ${MAX_LIMIT}, got ${Describe.show(n)}`)
}
