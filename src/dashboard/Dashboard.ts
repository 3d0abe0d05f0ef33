/**
 * The web dashboard: routes to add to your own `effect/http` `HttpRouter`, or a Layer that serves it
 * on its own port.
 *
 * @since 0.1.0
 */
import * as internal from "../internal/dashboard/Dashboard.js"

/**
 * Decides whether a request may write: change admin limits, and retry, delete or requeue jobs. A
 * request it denies sees no write buttons, and its POSTs answer 403.
 *
 * @since 0.1.0
 * @category models
 */
export type Authorize = internal.Authorize

/**
 * Denies every write: the default. The concurrency page says writes are disabled.
 *
 * @since 0.1.0
 * @category authorization
 */
export const readOnly = internal.readOnly

/**
 * Allows every write. Only for a dashboard nobody else can reach (a local demo, a test).
 *
 * @since 0.1.0
 * @category authorization
 */
export const allowWrites = internal.allowWrites

/**
 * Options of {@link router}: `prefix`, `authorize`, `pageSize`, `csrfSecret`.
 *
 * @since 0.1.0
 * @category models
 */
export type DashboardOptions = internal.DashboardOptions

/**
 * Options of {@link layer}: the router's, plus `port` and `host`.
 *
 * @since 0.1.0
 * @category models
 */
export type ServeOptions = internal.ServeOptions

/**
 * The dashboard's routes, as a Layer adding them to your app's `HttpRouter` (merge it into the layers
 * given to `HttpRouter.serve`). Their handlers need a `JobStore`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const router = internal.router

/**
 * A dashboard served by {@link layer}.
 *
 * @since 0.1.0
 * @category services
 */
export const DashboardServer = internal.DashboardServer

/**
 * A dashboard served by {@link layer}.
 *
 * @since 0.1.0
 * @category services
 */
export type DashboardServer = internal.DashboardServer

/**
 * The URL of the dashboard served by {@link layer}.
 *
 * @since 0.1.0
 * @category accessors
 */
export const url = internal.url

/**
 * Serves the dashboard on its own HTTP server (`@effect/platform-node`), loopback only unless `host`
 * says otherwise. Fails with `MissingPeerDependency` without that peer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = internal.layer
