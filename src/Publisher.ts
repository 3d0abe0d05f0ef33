/**
 * The publisher: enqueue jobs, publish messages, send requests.
 *
 * @since 0.1.0
 */
import * as internal from "./internal/publisher/Publisher.js"

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

/**
 * The parameters of a batch: one `JobParameters` for every item, or one per item.
 *
 * @since 0.2.0
 * @category models
 */
export type BatchParameters<A> = internal.BatchParameters<A>

/**
 * An item of a batch was refused (its payload, its parameters or its date); nothing of the batch was
 * written. Names the item's index and carries the item's own error as `cause`.
 *
 * @since 0.2.0
 * @category errors
 */
export const InvalidBatchItem = internal.InvalidBatchItem

/**
 * An item of a batch was refused; nothing of the batch was written.
 *
 * @since 0.2.0
 * @category errors
 */
export type InvalidBatchItem = internal.InvalidBatchItem

/**
 * What a batch enqueue can fail with.
 *
 * @since 0.2.0
 * @category errors
 */
export type BatchPublishError = internal.BatchPublishError

/**
 * What an enqueue did: `Created` a job, or (with a job key) `Replaced` the payload of the pending job
 * holding the key, or `Joined` the job holding it (mode `keep`, a throttle window, a holder past
 * replacing). `id` is the job that holds the key. Returned by `submit` / `submitMany`.
 *
 * @since 1.1.0
 * @category models
 */
export type Submitted = internal.Submitted
