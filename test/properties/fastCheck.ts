/**
 * fast-check properties as Effect tests. @effect/vitest 4's `it.effect.prop` takes `effect/Arbitrary`
 * generators (its own, not fast-check's), while these properties — and the models in `test/support`
 * and `warp-effect/testing`'s `Workload` — are fast-check arbitraries (with weights, `chain`, shrinking
 * and fixed `examples`). So a property registers one test with `tester` (`it.effect` or `it.live`, or
 * a `layer(...)` block's `it.effect`) and runs `fc.assert` inside it: every case runs with that test's
 * services (a `layer` block's are built once and shared by the cases, as before) in a scope of its own,
 * and, with `testServicesPerCase`, under fresh test services (`TestClock`, `TestConsole`), as
 * `it.effect.prop` gave each case. fast-check prints the seed and the shrunk counterexample on failure.
 */
import type { Vitest } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as TestClock from "effect/testing/TestClock"
import * as TestConsole from "effect/testing/TestConsole"
import * as fc from "fast-check"

/** The values of a tuple of arbitraries. */
export type Values<Arbs extends ReadonlyArray<fc.Arbitrary<any>>> = { -readonly [K in keyof Arbs]: Arbs[K] extends fc.Arbitrary<infer T> ? T : never }

export interface PropertyOptions<Ts> {
  /** fast-check's parameters (`numRuns`, `seed`, `examples`, ...). */
  readonly fastCheck?: fc.Parameters<Ts>
  /** The vitest timeout of the whole property. */
  readonly timeout?: number
  /** Each case under fresh test services (what `it.effect.prop` did), not the test's. */
  readonly testServicesPerCase?: boolean
}

/** The arbitraries as `fc.asyncProperty` takes them (their values are typed by {@link Values}). */
type Untyped = [fc.Arbitrary<unknown>, ...Array<fc.Arbitrary<unknown>>]

/** Test services of one case, as @effect/vitest builds them for an `it.effect` test. */
const testServices = Layer.mergeAll(TestConsole.layer, TestClock.layer())

/** Registers, with `tester`, a property over `arbitraries` whose cases run `self` (see the module doc). */
export const property = <R, const Arbs extends ReadonlyArray<fc.Arbitrary<any>>>(
  tester: Vitest.Tester<R | Scope.Scope>,
  name: string,
  arbitraries: Arbs,
  self: (values: Values<Arbs>) => Effect.Effect<unknown, unknown, R | Scope.Scope>,
  options: PropertyOptions<Values<Arbs>> = {}
): void =>
  tester(
    name,
    () =>
      Effect.gen(function* () {
        const context = yield* Effect.context<R>()
        const runCase = (values: Values<Arbs>, signal: AbortSignal) => {
          const body = Effect.scoped(Effect.suspend(() => self(values)))
          return Effect.runPromiseWith(context)(options.testServicesPerCase === true ? Effect.provide(body, testServices) : body, { signal })
        }
        yield* Effect.promise((signal) =>
          fc.assert(
            fc.asyncProperty(...(arbitraries as unknown as Untyped), async (...values: ReadonlyArray<unknown>) => {
              await runCase(values as Values<Arbs>, signal)
            }),
            options.fastCheck as fc.Parameters<[unknown, ...Array<unknown>]> | undefined
          )
        )
      }),
    options.timeout
  )
