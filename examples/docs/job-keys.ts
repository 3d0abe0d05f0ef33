import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Contract, JobParameters, Publisher } from "warp-effect"

export const SendDigest = Contract.job("SendDigest", Schema.Struct({ user: Schema.String, items: Schema.Number }))
export const RebuildIndex = Contract.job("RebuildIndex", Schema.Struct({ shard: Schema.Number }))
export const SyncProfile = Contract.job("SyncProfile", Schema.Struct({ user: Schema.String, version: Schema.Number }))

export const program = Effect.gen(function* () {
  const publisher = yield* Publisher.Publisher

  // One pending digest per user: a later enqueue replaces its payload and time (mode "replace", the default).
  const first = yield* publisher.submit(SendDigest, { user: "u1", items: 3 }, JobParameters.make().withJobKey("digest:u1"))
  const second = yield* publisher.submit(SendDigest, { user: "u1", items: 5 }, JobParameters.make().withJobKey("digest:u1"))
  // first: { _tag: "Created", id }, second: { _tag: "Replaced", id } (the same id)

  // Deduplicate while the job waits or runs: "keep" (the only mode with includeProcessing).
  const rebuild = JobParameters.make().withJobKey("rebuild:7", { mode: "keep", includeProcessing: true })
  const id = yield* publisher.enqueue(RebuildIndex, { shard: 7 }, rebuild) // the holder's id when one is live

  // Throttle: at most one job per minute for this key; enqueues within the minute join it.
  const throttled = yield* publisher.submit(RebuildIndex, { shard: 8 }, JobParameters.make().withThrottle("rebuild:8", "1 minute"))

  // Debounce: runs once, 5 seconds after the LAST enqueue of the key, with the last payload.
  const debounced = yield* publisher.submit(SyncProfile, { user: "u1", version: 42 }, JobParameters.make().withDebounce("profile:u1", "5 seconds"))

  // A batch: items with the same key resolve in order (here: Created, Replaced, Replaced; one job with version 3).
  const batch = yield* publisher.submitMany(
    SyncProfile,
    [1, 2, 3].map((version) => ({ user: "u2", version })),
    JobParameters.make().withJobKey("profile:u2")
  )
  return { first, second, id, throttled, debounced, batch }
})
