import * as Effect from "effect/Effect"

/** Counts live holders per key at every instant; records the maximum ever seen. */
export class HolderCounter {
  private readonly live = new Map<string, number>()
  readonly max = new Map<string, number>()
  enter(key: string) {
    const n = (this.live.get(key) ?? 0) + 1
    this.live.set(key, n)
    this.max.set(key, Math.max(this.max.get(key) ?? 0, n))
  }
  exit(key: string) {
    this.live.set(key, (this.live.get(key) ?? 1) - 1)
  }
  /** Runs `body` as a holder of `key`. */
  hold<A, E, R>(key: string, body: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> {
    return Effect.acquireUseRelease(
      Effect.sync(() => this.enter(key)),
      () => body,
      () => Effect.sync(() => this.exit(key))
    )
  }
  current(key: string) {
    return this.live.get(key) ?? 0
  }
}
