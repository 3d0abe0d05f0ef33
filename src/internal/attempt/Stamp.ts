/**
 * What the attempt's finalizing write persists as the row's metadata: the stamp of the resolved policy
 * (written by the first finalizing write, then read by every later attempt; globals never in it), as a
 * scoped layer over {@link ResolvedPolicy}.
 *
 * @since 0.3.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as JobMetadata from "../policy/JobMetadata.js"
import { ResolvedPolicy } from "./ResolvedPolicy.js"

/** The encoded metadata the finalizing write of this attempt stores. */
export class Stamp extends Context.Service<Stamp, { readonly metadata: unknown }>()("warp/Stamp") {}

/** The stamp of a resolved policy: its metadata, encoded once. */
export const of = (resolved: ResolvedPolicy["Service"]): Stamp["Service"] => ({ metadata: JobMetadata.encode(resolved.metadata) })

/** The stamp as a layer, encoded once from the resolved policy. */
export const layer: Layer.Layer<Stamp, never, ResolvedPolicy> = Layer.effect(Stamp, Effect.map(ResolvedPolicy, of))
