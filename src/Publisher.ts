/**
 * The publisher: enqueue jobs, publish messages, send requests.
 *
 * @since 0.1.0
 */
import * as internal from "./internal/job/Publisher.js"

/**
 * How publishing can fail: an invalid payload, an invalid policy, or the store.
 *
 * @since 0.1.0
 * @category errors
 */
export type PublishError = internal.PublishError

/**
 * The publisher's operations.
 *
 * @since 0.1.0
 * @category models
 */
export type PublisherService = internal.PublisherService

/**
 * The publisher service tag.
 *
 * @since 0.1.0
 * @category services
 */
export const Publisher = internal.Publisher

/**
 * The publisher service tag.
 *
 * @since 0.1.0
 * @category services
 */
export type Publisher = internal.Publisher

/**
 * Builds the publisher over the `JobStore` and `Registry` in context.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = internal.make

/**
 * The publisher as a Layer (needs `JobStore` and `Registry`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = internal.layer
