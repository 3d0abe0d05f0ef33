import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Contract, Handler, JobParameters, Publisher } from "warp-effect"

// A contract's default: every SendReceipt job runs before the jobs at priority 0 that are due.
export const SendReceipt = Contract.job("SendReceipt", Schema.Struct({ order: Schema.String }), { priority: 10 })

// A handler's default wins over the contract's (read at publish, from the handler this process registered).
export const Rebuild = Contract.job("RebuildIndex", Schema.Struct({ shard: Schema.Number }))
export const rebuild = Handler.job(Rebuild, ({ shard }) => Effect.log(`rebuilding ${shard}`), { priority: -5 })

// At enqueue: wins over both. An integer in [-32768, 32767]; anything else is an InvalidArgument.
export const publishSome = Effect.gen(function* () {
  const publisher = yield* Publisher.Publisher
  yield* publisher.enqueue(SendReceipt, { order: "o-1" }) // priority 10, from the contract
  yield* publisher.enqueue(Rebuild, { shard: 3 }, JobParameters.make().withPriority(100)) // this one first
  // a batch: each item's own priority from the parameters function
  yield* publisher.enqueueMany(Rebuild, [{ shard: 1 }, { shard: 2 }], ({ shard }) =>
    JobParameters.make().withPriority(shard === 1 ? 1 : 0))
})
