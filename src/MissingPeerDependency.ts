/**
 * The error of features whose optional peer dependency is not installed.
 *
 * @since 0.2.0
 */
import * as internal from "./internal/MissingPeer.js"

/**
 * An optional peer dependency that a feature needs is not installed (`ioredis` for the Redis provider,
 * `@effect/platform-node` for `Dashboard.layer`).
 *
 * @since 0.2.0
 * @category errors
 */
export const MissingPeerDependency = internal.MissingPeerDependency

/**
 * An optional peer dependency that a feature needs is not installed.
 *
 * @since 0.2.0
 * @category errors
 */
export type MissingPeerDependency = internal.MissingPeerDependency
