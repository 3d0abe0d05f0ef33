import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Contract, JobParameters, Publisher, Semaphore } from "warp-effect"

// Every tenant's key gets the same share of the workers while several tenants have jobs waiting:
// a tenant with 10,000 queued imports no longer delays one with 10.
export const Import = Contract.job("Import", Schema.Struct({ tenant: Schema.String, file: Schema.String }))

export const importAll = (tenant: string, files: ReadonlyArray<string>, premium: boolean) =>
  Effect.flatMap(Publisher.Publisher, (publisher) =>
    publisher.enqueueMany(
      Import,
      files.map((file) => ({ tenant, file })),
      // weight 2: served twice as often as a weight-1 tenant while both are backlogged
      JobParameters.make().withSemaphore(`import:${tenant}`, 4, "Wait", { weight: premium ? 2 : 1 })
    )
  )

// On a contract (or a handler) the weight is carried onto the row at enqueue, like a Fifo policy.
export const Report = Contract.job("Report", Schema.Struct({ id: Schema.String }), {
  policy: [Semaphore("reports", 2, { weight: 1 })]
})
