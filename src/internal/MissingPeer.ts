/**
 * The error of a subpath whose optional peer dependency is not installed.
 *
 * @since 0.2.0
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"

/** An optional peer dependency that a feature needs is not installed. */
export class MissingPeerDependency extends Data.TaggedError("MissingPeerDependency")<{
  /** The npm package that is missing, e.g. `ioredis`. */
  readonly peer: string
  /** The feature that needs it, e.g. `warp-effect/redis`. */
  readonly feature: string
  readonly cause?: unknown
}> {
  override get message(): string {
    return `${this.feature} needs the optional peer dependency '${this.peer}': install it with npm install ${this.peer}`
  }
}

/** Imports an optional peer, failing with {@link MissingPeerDependency} when it is not installed. */
export const importPeer = <A>(peer: string, feature: string, load: () => Promise<A>): Effect.Effect<A, MissingPeerDependency> =>
  Effect.tryPromise({ try: load, catch: (cause) => new MissingPeerDependency({ peer, feature, cause }) })
