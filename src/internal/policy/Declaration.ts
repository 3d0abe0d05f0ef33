/**
 * Policy declarations attached to contracts and handlers.
 *
 * @since 0.1.0
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Describe from "../error/Describe.js"
import * as ComputedLimit from "./ComputedLimit.js"
import { InvalidPolicy } from "./InvalidPolicy.js"
import { type FamilyName, type FamilyValue, families, type Policies } from "./PolicyFamily.js"
import { validate } from "./PolicyValues.js"

/** Where a declaration may be placed: anywhere, or only where it can be stamped at publish. */
export type Placement = "anywhere" | "publishOnly"

/** A validated policy of one family, ready to attach to a contract or handler. */
export interface Declaration<K extends FamilyName = FamilyName, P extends Placement = Placement> {
  readonly _tag: "PolicyDeclaration"
  readonly family: K
  readonly value: FamilyValue<K>
  readonly placement: P
  /** A concurrency limit computed from the payload at resolution (`value.limit` is then a placeholder). */
  readonly limitFrom?: ComputedLimit.LimitFrom<unknown> | undefined
}

/** A declaration a handler may carry (everything but publish-only ones such as a `Total` timeout). */
export type HandlerDeclaration = Declaration<FamilyName, "anywhere">

/**
 * Builds a declaration, validating `input` against the family's schema.
 * Throws {@link InvalidPolicy} — a declaration is module-level code, so a bad one fails at load.
 */
export const make = <K extends FamilyName, P extends Placement = "anywhere">(
  family: K,
  input: unknown,
  placement?: P,
  entry?: string
): Declaration<K, P> => Result.getOrThrowWith(makeEither(family, input, placement, entry), (e) => e)

/** Like {@link make}, returning the error instead of throwing it. */
export const makeEither = <K extends FamilyName, P extends Placement = "anywhere">(
  family: K,
  input: unknown,
  placement?: P,
  entry?: string
): Result.Result<Declaration<K, P>, InvalidPolicy> =>
  Result.map(
    validate(family, families[family].schema as unknown as Schema.Codec<FamilyValue<K>, any>, input, entry),
    (value) => ({ _tag: "PolicyDeclaration", family, value, placement: (placement ?? "anywhere") as P })
  )

/** Whether a value looks like a declaration (used for run-time checks of untyped handlers). */
export const isDeclaration = (u: unknown): u is Declaration =>
  typeof u === "object" && u !== null && (u as { _tag?: unknown })._tag === "PolicyDeclaration"

/**
 * Folds a declaration site's list into one value per family. Two declarations of one family on one
 * site (e.g. `Mutex` and `Semaphore`) are rejected rather than silently ordered.
 */
export const collect = (
  site: string,
  declarations: ReadonlyArray<Declaration>
): Result.Result<Policies, InvalidPolicy> => {
  const out: Record<string, unknown> = {}
  for (const d of declarations) {
    if (!isDeclaration(d) || !(d.family in families)) {
      return Result.fail(new InvalidPolicy({ family: String((d as any)?.family), message: `${site}: every policy entry must be a declaration (Mutex, Semaphore, Retry, ...), got ${Describe.show(d)}`, value: d }))
    }
    if (d.family in out) {
      return Result.fail(
        new InvalidPolicy({
          family: d.family,
          message: `${site} declares two '${d.family}' policies; Mutex and Semaphore (and any two of one family) fill one slot — declare one`
        })
      )
    }
    const schema = families[d.family].schema as unknown as Schema.Codec<any, any>
    const checked = Result.flatMap(
      Result.try({ try: () => Schema.encodeSync(schema)(d.value), catch: () => new InvalidPolicy({ family: d.family, message: `${site}: malformed '${d.family}' declaration` }) }),
      (encoded) => validate(d.family, schema, encoded, site)
    )
    if (Result.isFailure(checked)) return Result.fail(checked.failure)
    out[d.family] = checked.success
    if (d.family === "concurrency" && typeof d.limitFrom === "function") ComputedLimit.attach(out, d.limitFrom)
  }
  return Result.succeed(out as Policies)
}
