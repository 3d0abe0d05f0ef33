/**
 * Resolves the effective limit of a key for one attempt: admin row > declared limit > 1. Scoped to
 * the attempt: each key is looked up at most once per attempt; admin changes are seen at the next
 * pickup.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { ConcurrencyLimitManagerService, LimitStoreError } from "./ConcurrencyLimitManager.js"

/** A per-attempt resolver. */
export interface ConcurrencyLimitResolver {
  readonly limitFor: (key: string, declared: number | undefined) => Effect.Effect<number, LimitStoreError>
}

/** Creates a resolver whose admin-row lookups are cached for its lifetime (one attempt). */
export const make = (manager: ConcurrencyLimitManagerService): Effect.Effect<ConcurrencyLimitResolver> =>
  Effect.sync(() => {
    const cache = new Map<string, Option.Option<number>>()
    return {
      limitFor: (key, declared) =>
        Effect.suspend(() => {
          const hit = cache.get(key)
          const lookup =
            hit !== undefined
              ? Effect.succeed(hit)
              : manager.get(key).pipe(
                  Effect.map(Option.map((row) => row.slots)),
                  Effect.tap((slots) => Effect.sync(() => cache.set(key, slots)))
                )
          return Effect.map(lookup, Option.getOrElse(() => declared ?? 1))
        })
    }
  })
