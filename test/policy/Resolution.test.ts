import { describe, expect, expectTypeOf, it } from "@effect/vitest"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import {
  CircuitBreaker,
  Contract,
  GlobalPolicies,
  Handler,
  JobMetadata,
  JobParameters,
  Mutex,
  RateLimit,
  Retry,
  Semaphore,
  Timeout
} from "warp-effect"
import * as Publisher from "../../src/internal/publisher/Publisher.js"
import type * as Declaration from "../../src/internal/policy/Declaration.js"
import { families, type FamilyName, familyNames, type Policies, type Rung, rungOrder } from "../../src/internal/policy/PolicyFamily.js"
import * as PolicyResolution from "../../src/internal/attempt/PolicyResolution.js"

/**
 * One declaration per (family, rung), each distinguishable from the others. A rung the family does
 * not have still gets a value — written the only way it can be (a hand-written row entry, a raw
 * globals object) — to show that resolution ignores it.
 */
interface RungValues {
  readonly enqueue: (p: JobParameters.JobParameters) => JobParameters.JobParameters
  readonly handler: Declaration.HandlerDeclaration
  readonly contract: Declaration.Declaration
  readonly global: Declaration.Declaration
}

const values: Record<FamilyName, RungValues> = {
  concurrency: {
    enqueue: (p) => p.withMutex("enqueue-key", "Wait"),
    handler: Semaphore("x", 3),
    contract: Mutex("y"),
    global: Mutex("global-key")
  },
  retry: {
    enqueue: (p) => p.withRetry(2),
    handler: Retry(3),
    contract: Retry(4),
    global: Retry(5)
  },
  timeout: {
    enqueue: (p) => p.withTimeout("1 second"),
    handler: Timeout("2 seconds"),
    contract: Timeout("3 seconds"),
    global: Timeout("4 seconds")
  },
  rateLimit: {
    enqueue: (p) => p.withRateLimit("enqueue-api", 1, "1 second"),
    handler: RateLimit("handler-api", 2, "1 second"),
    contract: RateLimit("contract-api", 3, "1 second"),
    global: RateLimit("global-api", 4, "1 second")
  },
  circuitBreaker: {
    // JobParameters has no withCircuitBreaker: the entry can only come from a hand-written row
    enqueue: (p) => p,
    handler: CircuitBreaker("handler-group", 2, "1 second"),
    contract: CircuitBreaker("contract-group", 3, "1 second"),
    global: CircuitBreaker("global-group", 4, "1 second")
  }
}

const enqueueValue = (family: FamilyName): unknown =>
  family === "circuitBreaker"
    ? CircuitBreaker("enqueue-group", 1, "1 second").value
    : values[family].enqueue(JobParameters.make()).entries.get(family)!.value

const subsets: ReadonlyArray<ReadonlyArray<Rung>> = [
  ...rungOrder.map((r) => [r]),
  ...rungOrder.flatMap((a, i) => rungOrder.slice(i + 1).map((b) => [a, b])),
  rungOrder
]

interface Row {
  readonly family: FamilyName
  readonly rungs: ReadonlyArray<Rung>
  /** The rung whose value is in force, or none. */
  readonly winner: Rung | "none"
}

/** The table: every family x every single rung, every pair of rungs, and all four. */
const table: ReadonlyArray<Row> = familyNames.flatMap((family) =>
  subsets.map((rungs) => ({
    family,
    rungs,
    winner: rungOrder.find((r) => rungs.includes(r) && families[family].rungs.has(r)) ?? ("none" as const)
  }))
)

const Payload = Schema.Struct({})
const now = new Date("2030-01-01T00:00:00.000Z")

const resolveRow = ({ family, rungs }: Row) => {
  const v = values[family]
  const contract = Contract.job("T", Payload, { policy: rungs.includes("contract") ? [v.contract] : [] })
  const handler = Handler.job(contract, () => undefined as never, { policy: rungs.includes("handler") ? [v.handler] : [] })
  const params = rungs.includes("enqueue") ? v.enqueue(JobParameters.make()) : JobParameters.make()
  // what the publisher writes, then what the store gives back (JSON round trip)
  let published = JSON.parse(JSON.stringify(JobMetadata.encode(Publisher.publishMetadata(contract, params, now))))
  if (family === "circuitBreaker" && rungs.includes("enqueue")) {
    published = { policies: { circuitBreaker: { source: "enqueue", value: Schema.encodeSync(families.circuitBreaker.schema)(enqueueValue(family) as any) } } }
  }
  const stored = JobMetadata.decode(published)
  if (Result.isFailure(stored)) throw new Error(stored.failure)
  const globals: Policies = rungs.includes("global") ? ({ [family]: v.global.value } as Policies) : {}
  return { published: stored.success, resolution: PolicyResolution.resolve({ stored: stored.success, handler, contract, globals, now }) }
}

const valueOf = (family: FamilyName, rung: Rung): unknown =>
  rung === "enqueue" ? enqueueValue(family) : (values[family][rung] as Declaration.Declaration).value

describe("policy resolution", () => {
  it.each(table.map((row) => ({ ...row, label: row.rungs.join("+") })))(
    "$family declared at $label -> $winner wins",
    (row) => {
      const { family, winner } = row
      const { published, resolution } = resolveRow(row)
      // nothing but explicit enqueue metadata is stored at publish, and nothing is stamped yet
      expect(published.stampedAt).toBeUndefined()
      expect(Object.keys(published.policies)).toEqual(row.rungs.includes("enqueue") ? [family] : [])
      // the first attempt stamps its winner with the rung it came from; globals are never stamped
      expect(resolution.metadata.stampedAt).toBe(now.toISOString())
      const entry = resolution.metadata.policies[family]
      if (winner === "none" || winner === "global") {
        expect(entry).toBeUndefined()
      } else {
        expect(entry).toEqual({ source: winner, value: valueOf(family, winner) })
      }
      expect(resolution.effective[family]).toEqual(winner === "none" ? undefined : valueOf(family, winner))
      // no other family picks anything up
      for (const other of familyNames) if (other !== family) expect(resolution.effective[other]).toBeUndefined()

      // a later attempt reads the stamp and never re-resolves, whatever the deploy now declares
      const redeployed = Contract.job("T", Payload, { policy: [values[family].contract] })
      const again = PolicyResolution.resolve({
        stored: resolution.metadata,
        handler: Handler.job(redeployed, () => undefined as never, { policy: [values[family].handler] }),
        contract: redeployed,
        globals: {},
        now: new Date(now.getTime() + 60_000)
      })
      expect(again.metadata).toEqual(resolution.metadata)
      expect(again.effective[family]).toEqual(winner === "none" || winner === "global" ? undefined : valueOf(family, winner))
    }
  )

  it("the table covers every family at every rung, pair and the full chain", () => {
    expect(table.length).toBe(familyNames.length * (4 + 6 + 1))
    // the winners the spec names, spot-checked independently of the table's own rule
    const winnerOf = (family: FamilyName, rungs: string) => table.find((r) => r.family === family && r.rungs.join("+") === rungs)!.winner
    expect(winnerOf("concurrency", "global")).toBe("none")
    expect(winnerOf("rateLimit", "global")).toBe("none")
    expect(winnerOf("circuitBreaker", "enqueue")).toBe("none")
    expect(winnerOf("circuitBreaker", "enqueue+handler")).toBe("handler")
    expect(winnerOf("retry", "contract+global")).toBe("contract")
    expect(winnerOf("timeout", "enqueue+handler")).toBe("enqueue")
    expect(winnerOf("concurrency", "handler+contract")).toBe("handler")
  })

  it("a handler Semaphore('x', 3) replaces a contract Mutex('y') outright — no merge", () => {
    const { resolution } = resolveRow({ family: "concurrency", rungs: ["handler", "contract"], winner: "handler" })
    expect(resolution.effective.concurrency).toEqual(Semaphore("x", 3).value)
    expect(JobMetadata.encode(resolution.metadata)).toEqual({
      policies: { concurrency: { source: "handler", value: { key: "x", limit: 3, mode: "Wait" } } },
      stampedAt: now.toISOString()
    })
  })

  it("families without a global rung cannot be given a global default; circuit breakers have no enqueue setter", () => {
    expect(() => GlobalPolicies.layer([Mutex("k")])).toThrow(/no global default/)
    expect(() => GlobalPolicies.layer([RateLimit("k", 1, "1 second")])).toThrow(/no global default/)
    expect(() => GlobalPolicies.layer([Retry(2), Timeout("1 second"), CircuitBreaker("g", 1, "1 second")])).not.toThrow()
    expectTypeOf<JobParameters.JobParameters>().not.toHaveProperty("withCircuitBreaker")
    expectTypeOf<JobParameters.JobParameters>().toHaveProperty("withRateLimit")
    // @ts-expect-error — there is no enqueue rung for circuit breakers
    JobParameters.make().withCircuitBreaker
  })
})
