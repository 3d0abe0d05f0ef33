/**
 * The cost of an attempt's per-attempt layers, in isolation: N runs of a trivial program that reads five
 * services (an attempt's record, context, resolved policy, stamp and slot scope), given them
 *   - "context": as one context built by plain functions (`Effect.provideContext`, the worker before issue 39);
 *   - "one-layer": as one layer per run whose build makes the five in turn (`Layer.fromBuild`), the way
 *     `RunAttempt` builds them;
 *   - "layer-effect": as five layers, `Layer.effect` + `Layer.provideMerge`, `Effect.provide(…, { local: true })`.
 * Prints µs of CPU per run. In the worker (`profile-keyless.ts PROFILE_STORE=stub`) five layers cost
 * about 100 µs per attempt more than one, some 5x what they cost here (garbage collection, a cold
 * cache, the lane's larger context merged into each layer's build).
 *
 *   npx tsx attempt-layers.ts            # ATTEMPT_RUNS (default 50,000)
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"

const RUNS = Number(process.env.ATTEMPT_RUNS ?? 50_000)

class A extends Context.Service<A, { readonly n: number }>()("bench/A") {}
class B extends Context.Service<B, { readonly n: number }>()("bench/B") {}
class C extends Context.Service<C, { readonly n: number }>()("bench/C") {}
class D extends Context.Service<D, { done: boolean }>()("bench/D") {}
class E extends Context.Service<E, { done: boolean }>()("bench/E") {}

const program = Effect.gen(function* () {
  const a = yield* A
  const b = yield* B
  const c = yield* C
  ;(yield* D).done = true
  ;(yield* E).done = true
  return a.n + b.n + c.n
})

const viaContext = (i: number) =>
  Effect.scopedWith((scope) =>
    Effect.gen(function* () {
      const e = { done: false }
      yield* Scope.addFinalizerExit(scope, () => Effect.void)
      const a = { n: i }
      const b = { n: a.n + 1 }
      yield* Scope.fork(scope)
      return yield* Effect.provideContext(program, Context.make(A, a).pipe(Context.add(B, b), Context.add(C, { n: b.n + 1 }), Context.add(D, { done: false }), Context.add(E, e)))
    })
  )

/** One layer whose build makes the five services in turn (`Layer.fromBuild`), as `RunAttempt` builds them. */
const viaOneLayer = (i: number) =>
  Effect.scopedWith((scope) =>
    Effect.flatMap(
      Layer.buildWithScope(
        Layer.fromBuild((_, layerScope) =>
          Effect.gen(function* () {
            const e = yield* Scope.provide(Effect.acquireRelease(Effect.sync(() => ({ done: false })), () => Effect.void), layerScope)
            const a = { n: i }
            const b = { n: a.n + 1 }
            yield* Scope.fork(layerScope)
            return Context.make(E, e).pipe(Context.add(A, a), Context.add(B, b), Context.add(C, { n: b.n + 1 }), Context.add(D, { done: false }))
          })
        ),
        scope
      ),
      (ctx) => Effect.provideContext(program, ctx)
    )
  )

const eM = Layer.effect(E, Effect.acquireRelease(Effect.sync(() => ({ done: false })), () => Effect.void))
const bM = Layer.effect(B, Effect.map(A, (a) => ({ n: a.n + 1 })))
const cM = Layer.effect(C, Effect.map(B, (b) => ({ n: b.n + 1 })))
const dM = Layer.effect(D, Effect.map(Effect.flatMap(Effect.scope, (s) => Scope.fork(s)), () => ({ done: false })))
const viaLayerEffect = (i: number) =>
  Effect.provide(program, dM.pipe(Layer.provideMerge(cM), Layer.provideMerge(bM), Layer.provideMerge(Layer.succeed(A, { n: i })), Layer.provideMerge(eM)), {
    local: true
  })

const measure = (name: string, run: (i: number) => Effect.Effect<number, any>) =>
  Effect.gen(function* () {
    for (let i = 0; i < 2000; i++) yield* run(i)
    const cpu = process.cpuUsage()
    for (let i = 0; i < RUNS; i++) yield* run(i)
    const used = process.cpuUsage(cpu)
    console.log(JSON.stringify({ form: name, runs: RUNS, usPerRun: Number(((used.user + used.system) / RUNS).toFixed(2)) }))
  })

Effect.runPromise(
  Effect.gen(function* () {
    for (let k = 0; k < 2; k++) {
      yield* measure("context", viaContext)
      yield* measure("one-layer", viaOneLayer)
      yield* measure("layer-effect", viaLayerEffect)
    }
  })
)
