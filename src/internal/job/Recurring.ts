/**
 * Recurring jobs: cron-scheduled firings of a job contract. Firings bypass the publish pipeline
 * (no enqueue-time metadata) and still honour the contract's declared policy, because resolution
 * happens at execution. `Scheduler.layer` fires them.
 *
 * @since 0.1.0
 */
import * as Cron from "effect/Cron"
import * as Data from "effect/Data"
import * as Result from "effect/Result"
import * as Describe from "../error/Describe.js"
import * as PayloadCodec from "./PayloadCodec.js"
import { createHash } from "node:crypto"
import type { JobContract } from "./Contract.js"

/** A recurring registration: fire `contract` with `payload` on every `cron` tick. */
export interface Recurring<A = any> {
  readonly id: string
  readonly contract: JobContract<string, A>
  readonly cron: string
  readonly payload: A
}

/** A recurring declaration that cannot fire (blank id, unparsable cron expression). */
export class InvalidRecurring extends Data.TaggedError("InvalidRecurring")<{
  readonly id: string
  readonly message: string
}> {}

/**
 * Declares a recurring job. `id` must be unique; `cron` is a standard 5- or 6-field expression
 * (seconds first when 6), evaluated in UTC. Throws {@link InvalidRecurring} — a declaration is
 * module-level code, so a bad one fails at load.
 *
 * @example
 * const nightly = Recurring.make("nightly-report", Report, "0 3 * * *", { kind: "daily" })
 */
export const make = <A>(id: string, contract: JobContract<string, A>, cron: string, payload: A): Recurring<A> => {
  const entry = `Recurring.make(${Describe.show(id, 24)})`
  if (typeof id !== "string" || id.trim().length === 0) throw new InvalidRecurring({ id, message: `${entry}: recurring id must not be empty` })
  const parsed = Cron.parse(cron, "UTC")
  if (Result.isFailure(parsed)) {
    throw new InvalidRecurring({ id, message: `${entry}: invalid cron expression '${cron}': ${parsed.failure.message}` })
  }
  // the payload is stored at every firing: it must come back unchanged (throws InvalidPayload)
  Result.getOrThrowWith(PayloadCodec.encode(entry, contract, payload), (e) => e)
  return { id, contract, cron, payload }
}

/** The first tick of `recurring` strictly after `afterMs` (epoch milliseconds, UTC). */
export const nextTick = (recurring: Recurring, afterMs: number): Date => Cron.next(Cron.parseUnsafe(recurring.cron, "UTC"), afterMs)

/**
 * The job id of one firing: a UUIDv7 whose time is the tick and whose other bits hash
 * `(recurring id, tick)`. Every scheduler computes the same id for the same firing, so a second
 * insert of it conflicts and the firing happens once.
 */
export const firingId = (recurringId: string, tick: Date): string => {
  const b = createHash("sha256").update(`${recurringId}\u0000${tick.getTime()}`).digest().subarray(0, 16)
  b.writeUIntBE(tick.getTime(), 0, 6)
  b[6] = 0x70 | (b[6]! & 0x0f)
  b[8] = (b[8]! & 0x3f) | 0x80
  const h = b.toString("hex")
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
}
