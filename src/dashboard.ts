/**
 * `warp-effect/dashboard`: the web dashboard, as routes to add to your own `effect/http`
 * `HttpRouter`, or a Layer that serves it on its own port (needs the optional peer
 * `@effect/platform-node`; without it, `Dashboard.layer` fails with `MissingPeerDependency`).
 *
 * @since 0.2.0
 * @module warp-effect/dashboard
 */

/**
 * The dashboard's router and server Layer.
 *
 * @since 0.1.0
 * @category modules
 */
export * as Dashboard from "./dashboard/Dashboard.js"
export { MissingPeerDependency } from "./MissingPeerDependency.js"
