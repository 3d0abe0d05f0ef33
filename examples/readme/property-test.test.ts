import { expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as fc from "fast-check"
import { Contract, Handler } from "warp-effect"
import { TestRuntime, Workload } from "warp-effect/testing"

// Your code: a contract, the service its handler calls, the handler.
class Gateway extends Context.Service<Gateway, { readonly charge: (order: number, jobId: string) => Effect.Effect<void, Error> }>()("Gateway") {}
const ChargeCard = Contract.job("ChargeCard", Schema.Struct({ order: Schema.Number }))
const chargeCard = Handler.job(ChargeCard, ({ order }, attempt) => Effect.flatMap(Gateway, (gateway) => gateway.charge(order, attempt.jobId)))

// In the test, the gateway plays each generated job's part: its duration, then succeed / fail / die.
const playingGateway = Gateway.of({ charge: (_order, jobId) => TestRuntime.play(jobId) })

it("keyed charges never overlap beyond their limit; Skip surplus is dropped, everything else runs once", () =>
  fc.assert(
    fc.asyncProperty(Workload.arbitrary({ maxJobs: 8 }), (workload) =>
      Effect.runPromise(
        Effect.gen(function* () {
          const run = yield* TestRuntime.run({
            handlers: [chargeCard],
            workload, // keys with Mutex / Semaphore(key, N), Skip or Wait; durations, results, arrivals
            enqueue: TestRuntime.enqueueWith(ChargeCard, (job) => ({ order: job.index })),
            worker: { concurrency: 4 }
          }).pipe(Effect.provideService(Gateway, playingGateway))
          for (const { key, limit } of workload.keys) expect(run.maxInside.get(key) ?? 0).toBeLessThanOrEqual(limit)
          for (const job of run.jobs) {
            if (job.state === "Deleted") expect([job.job.concurrency?.mode, job.runs]).toEqual(["Skip", 0])
            else expect([job.state, job.runs]).toEqual([job.job.result === "succeed" ? "Succeeded" : "Failed", 1])
          }
          expect(run.tally.Succeeded + run.tally.Failed + run.tally.Deleted).toBe(workload.jobs.length)
        })
      )
    ),
    { numRuns: 15 }
  ))
