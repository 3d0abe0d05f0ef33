import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Contract, JobParameters, Publisher, Semaphore } from "warp-effect"

// The spec's Wait (the default): a job picked up while its key is full is requeued and counted in
// stats:requeued. The claim takes the jobs whose key has a free slot first, so this is rare.
export const SyncTenant = Contract.job("SyncTenant", Schema.Struct({ tenant: Schema.String }), {
  policy: [Semaphore("tenant-sync", 2, { total: { group: "syncs", limit: 4 } })]
})

// Opt-in: a job of a full key is never claimed; it waits in the queue with no requeue writes.
export const RenderReport = Contract.job("RenderReport", Schema.Struct({ id: Schema.Number }), {
  policy: [Semaphore("renderer", 3, { requeue: false })]
})

// At enqueue, the same option: mode Wait only (any other mode is a typed InvalidPolicy).
export const enqueueRender = Effect.gen(function* () {
  const publisher = yield* Publisher.Publisher
  yield* publisher.enqueue(RenderReport, { id: 1 }, JobParameters.make().withSemaphore("renderer:eu", 3, "Wait", { requeue: false }))
})
