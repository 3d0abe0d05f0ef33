import * as Layer from "effect/Layer"
import type { JobStore } from "../../src/internal/store/JobStore.js"
import { JobStoreMemory, JobStorePg } from "warp-effect"
import { freshPgLayer } from "./db.js"

/** Both store implementations, each on fresh state per use. */
export const stores: ReadonlyArray<readonly [string, () => Layer.Layer<JobStore, unknown>]> = [
  ["memory", () => JobStoreMemory.layer],
  ["postgres", () => JobStorePg.layer.pipe(Layer.provide(freshPgLayer()))]
]
