import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Concurrency, Contract, Handler, JobParameters, Mutex, Publisher, Semaphore } from "warp-effect"

// On the contract: the default for everything that runs it.
export const ProcessPayment = Contract.job("ProcessPayment", Schema.Struct({ customerId: Schema.Number }), {
  policy: [Mutex("payment-processing")] // limit 1, mode Skip (dedupe)
})

// Up to 5 concurrent calls to the payment API across all workers and servers; surplus waits (requeued).
export const CallPaymentApi = Contract.job("CallPaymentApi", Schema.Struct({}), { policy: [Semaphore("payment-api", 5)] })

// Drop on saturation instead of requeuing.
export const DropWhenFull = Contract.job("DropWhenFull", Schema.Struct({}), { policy: [Semaphore("payment-api", 5, { mode: "Skip" })] })

// On the handler: wins over the contract, family by family (no merge).
export const handleUpdate = Handler.job(
  Contract.job("HandleTelegramUpdate", Schema.Struct({ userId: Schema.Number })),
  ({ userId }) => Effect.log(`update for ${userId}`),
  { policy: [Mutex("user-handler", { mode: "Wait" })] }
)

// At enqueue: wins over handler and contract. Invalid input is a typed InvalidPolicy error, never a clamp.
export const enqueueExamples = Effect.gen(function* () {
  const publisher = yield* Publisher.Publisher
  yield* publisher.enqueue(ProcessPayment, { customerId: 123 }, JobParameters.make().withMutex("payment:123"))
  yield* publisher.enqueue(ProcessPayment, { customerId: 7 }, JobParameters.make().withMutex("payment:7", "Wait"))
  yield* publisher.enqueue(CallPaymentApi, {}, JobParameters.make().withSemaphore("payment-api", 5))
  yield* publisher.enqueue(
    ProcessPayment,
    { customerId: 123 },
    JobParameters.make().configure(Concurrency.ConcurrencyMetadata, (m) => {
      m.key = "payment:123"
      m.limit = 1
    })
  )
  const bad = yield* Effect.flip(publisher.enqueue(CallPaymentApi, {}, JobParameters.make().withSemaphore("payment-api", 0)))
  yield* Effect.log(bad._tag) // "InvalidPolicy"
})
