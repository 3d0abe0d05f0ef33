import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import {
  CircuitBreaker,
  CircuitBreakerAddon,
  Concurrency,
  Contract,
  GlobalPolicies,
  Handler,
  JobParameters,
  Publisher,
  RateLimit,
  RateLimitAddon,
  Recurring,
  Retry,
  Scheduler,
  Timeout,
  Worker
} from "warp-effect"

// Contract: the default for everything that runs it. A Total timeout belongs here (or at enqueue).
export const Charge = Contract.job("Charge", Schema.Struct({ customerId: Schema.Number }), {
  policy: [Retry(5, { initialDelay: "2 seconds" }), Timeout("10 minutes", { scope: "Total" }), CircuitBreaker("payments", 5, "30 seconds")]
})

// Handler: wins over the contract, family by family (a whole value replaces, never merges).
export const charge = Handler.job(Charge, ({ customerId }) => Effect.log(`charging ${customerId}`), {
  policy: [RateLimit("payments-api", 100, "1 minute"), Timeout("20 seconds")]
})

// Enqueue: wins over both. There is no withCircuitBreaker: a breaker describes a dependency group.
export const chargeNow = Effect.flatMap(Publisher.Publisher, (publisher) =>
  publisher.enqueue(Charge, { customerId: 7 }, JobParameters.make().withRetry(2).withRateLimit("payments-api:vip", 10, "1 second"))
)

// Global defaults (Retry, Timeout, CircuitBreaker only): read live by every attempt, never stamped.
export const defaults = GlobalPolicies.layer([Retry(3), Timeout("5 minutes")])

// The addons: `Warp.layer({ handlers, rateLimit: true, circuitBreaker: true })` turns them on, or by hand
// hand them to the worker and provide their state, shared on PostgreSQL (`layerMemory` for one process).
export const worker = Worker.layer({ addons: [Concurrency.addon, CircuitBreakerAddon.addon, RateLimitAddon.addon] })
export const addonState = Layer.mergeAll(RateLimitAddon.layer, CircuitBreakerAddon.layer)

// Recurring: registered with the handlers, fired by Scheduler.layer once per tick across all schedulers.
export const nightly = Recurring.make("nightly-charge", Charge, "0 3 * * *", { customerId: 0 })
export const scheduler = Scheduler.layer
