/**
 * A job's metadata document: the policies resolved and stamped at publish (what the `metadata`
 * column holds).
 *
 * @since 0.1.0
 */
import * as internal from "./internal/policy/JobMetadata.js"

/**
 * Which rung a stamped value came from: `enqueue`, `handler` or `contract` (a schema).
 *
 * @since 0.1.0
 * @category models
 */
export const Source = internal.Source

/**
 * Which rung a stamped value came from.
 *
 * @since 0.1.0
 * @category models
 */
export type Source = internal.Source

/**
 * One entry per policy family (absent = nothing at this slot), a schema.
 *
 * @since 0.1.0
 * @category models
 */
export const PolicyEntries = internal.PolicyEntries

/**
 * One entry per policy family.
 *
 * @since 0.1.0
 * @category models
 */
export type PolicyEntries = internal.PolicyEntries

/**
 * The whole metadata document. `stampedAt` present = resolved; later attempts never re-resolve.
 *
 * @since 0.1.0
 * @category models
 */
export const JobMetadata = internal.JobMetadata

/**
 * The whole metadata document.
 *
 * @since 0.1.0
 * @category models
 */
export type JobMetadata = internal.JobMetadata

/**
 * Decodes a stored metadata document strictly: unknown families and wrong types are errors.
 *
 * @since 0.1.0
 * @category decoding
 */
export const decode = internal.decode

/**
 * Encodes metadata for storage.
 *
 * @since 0.1.0
 * @category encoding
 */
export const encode = internal.encode
