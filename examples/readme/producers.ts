import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import { Contract, JobParameters, Publisher } from "warp-effect"

const SendInvoice = Contract.job("SendInvoice", Schema.Struct({ customerId: Schema.Number }))

// The order row and its jobs commit together, or not at all: workers never see a job of an order
// that rolled back (a failure, a defect or an interruption inside the block publishes nothing).
export const placeOrder = (customerIds: ReadonlyArray<number>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const publisher = yield* Publisher.Publisher
    return yield* sql.withTransaction(
      Effect.gen(function* () {
        yield* sql`INSERT INTO orders (customer_ids) VALUES (${JSON.stringify(customerIds)})`
        // one call, one row per job, ids in order; per-item parameters from a function of the payload
        return yield* publisher.enqueueMany(
          SendInvoice,
          customerIds.map((customerId) => ({ customerId })),
          ({ customerId }) => JobParameters.make().withMutex(`customer-${customerId}`)
        )
      })
    )
  })
