import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { Contract, Database, Handler, JobStorePg, Publisher, Registry, Worker } from "warp-effect"

const Email = Contract.job("Email", Schema.Struct({ to: Schema.String }))

// Instant pickup is on by default: the store notifies, the worker listens, the poll is the fallback.
// `instantPickup: false` goes back to polling only (e.g. behind a pooler that cannot hold a LISTEN).
const env = Publisher.layer.pipe(
  Layer.provideMerge(Registry.layer({ handlers: [Handler.job(Email, ({ to }) => Effect.log(`mail to ${to}`))] })),
  Layer.provideMerge(JobStorePg.layerWith({ instantPickup: true })),
  Layer.provideMerge(Database.layer("postgres://postgres@127.0.0.1:5432/app"))
)

export const program = Effect.gen(function* () {
  // an idle worker starts a new job within milliseconds of its commit, whatever its poll interval
  yield* Worker.make({ pollInterval: "1 second" })
  const publisher = yield* Publisher.Publisher
  yield* publisher.enqueue(Email, { to: "ada@example.com" })
  // a Scheduled job starts when it comes due (the worker sets a timer), not at the next poll after it
  yield* publisher.schedule(Email, { to: "bob@example.com" }, new Date(Date.now() + 60_000))
}).pipe(Effect.scoped, Effect.provide(env))
