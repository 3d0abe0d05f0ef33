/**
 * Round-trip property of enqueue: over arbitrary values of a spread of payload schemas (numbers incl.
 * NaN/±Infinity/-0, dates, nested arrays and records, optional fields, unions, branded strings,
 * bigints, `undefined` in arrays, NUL and unpaired surrogates in strings), `Publisher.enqueue` either
 * fails with `InvalidPayload`, or the job's handler — run by a real worker — receives a value equal to
 * what was enqueued. Never a third outcome (another error, a defect, a job that fails to decode).
 *
 * Equality is the schema's own `Schema.toEquivalence` (so a `-0` enqueued as a plain number arrives as
 * `0`: the schema's equivalence holds them equal, and the codec accepts it), or — where that
 * equivalence is only reference equality (`Schema.Unknown`, an empty struct) — plain objects and arrays
 * equal member by member, leaves by `Equal.equals` (object key order is not part of the value: jsonb
 * reorders keys). The codec accepts by exactly this rule. For values the property
 * generates outside the schema's type (a wrong type at a leaf), the expected outcome is still one of the
 * two: rejection, or arrival of an equal value.
 *
 * Runs: WARP_PROPERTY_RUNS per schema on the memory store (default 300), and a smaller sample
 * (a tenth, at least 20) per schema on PostgreSQL, where the jsonb column is the real round trip.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Cause from "effect/Cause"
import * as Option from "effect/Option"
import * as Equal from "effect/Equal"
import * as Exit from "effect/Exit"
import * as fc from "fast-check"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { Contract, Handler, Publisher, Registry, Worker } from "warp-effect"
import type { JobStore } from "../../src/internal/store/JobStore.js"
import { stores } from "../support/stores.js"
import { detail, drained } from "../support/runtime.js"

const RUNS = Number(process.env.WARP_PROPERTY_RUNS ?? 300)
const PG_RUNS = Math.max(20, Math.floor(RUNS / 10))

/** Numbers JSON cannot carry, and -0, mixed with ordinary doubles. */
const nastyNumber = fc.oneof(
  { arbitrary: fc.integer(), weight: 5 },
  { arbitrary: fc.double(), weight: 3 },
  { arbitrary: fc.constantFrom(Number.NaN, Infinity, -Infinity, -0, 0, 1.5, 2 ** 53 + 2), weight: 1 }
)
const nastyString = fc.oneof(
  { arbitrary: fc.string(), weight: 6 },
  { arbitrary: fc.string({ unit: "binary" }), weight: 2 },
  { arbitrary: fc.constantFrom("a\u0000b", "\ud800", "x\udc00", "ok", "🙂", ""), weight: 1 }
)
const nastyDate = fc.oneof(fc.date({ noInvalidDate: false }), fc.constant(new Date(Number.NaN)))
/** Occasionally the wrong type at a leaf. */
const wrong = fc.oneof(fc.constant(undefined), fc.constant(null), fc.boolean(), fc.string(), fc.double(), fc.bigInt())
const leaf = <A>(a: fc.Arbitrary<A>) => fc.oneof({ arbitrary: a, weight: 19 }, { arbitrary: wrong as fc.Arbitrary<any>, weight: 1 })

const isPlain = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u) && [Object.prototype, null].includes(Object.getPrototypeOf(u))

/** Plain data equal member by member (key order ignored), leaves by Equal.equals. */
const sameData = (a: unknown, b: unknown): boolean => {
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => sameData(x, b[i]))
  if (isPlain(a) && isPlain(b)) {
    const ka = Object.keys(a)
    return ka.length === Object.keys(b).length && ka.every((k) => k in b && sameData(a[k], b[k]))
  }
  return Equal.equals(a, b)
}

interface Case {
  readonly contract: Contract.JobContract<string, any, any>
  readonly values: fc.Arbitrary<unknown>
}

const cases: ReadonlyArray<Case> = [
  {
    contract: Contract.job("Numbers", Schema.Struct({ n: Schema.Number, i: Schema.Int, f: Schema.Finite })),
    values: fc.record({ n: leaf(nastyNumber), i: leaf(nastyNumber), f: leaf(nastyNumber) })
  },
  {
    contract: Contract.job("Dates", Schema.Struct({ at: Schema.DateFromString, self: Schema.optional(Schema.Date), ms: Schema.DateFromMillis })),
    values: fc.record({ at: leaf(nastyDate), self: leaf(nastyDate), ms: leaf(nastyDate) }, { requiredKeys: ["at", "ms"] })
  },
  {
    contract: Contract.job(
      "Nested",
      Schema.Struct({
        items: Schema.Array(Schema.Struct({ sku: Schema.String, price: Schema.Number, tags: Schema.Array(Schema.String) })),
        attrs: Schema.Record(Schema.String, Schema.Union([Schema.Number, Schema.String, Schema.Null])),
        grid: Schema.Array(Schema.Array(Schema.Number))
      })
    ),
    values: fc.record({
      items: fc.array(fc.record({ sku: leaf(nastyString), price: leaf(nastyNumber), tags: fc.array(leaf(nastyString), { maxLength: 3 }) }), { maxLength: 4 }),
      attrs: fc.dictionary(nastyString, fc.oneof(nastyNumber, nastyString, fc.constant(null)), { maxKeys: 4 }),
      grid: fc.array(fc.array(leaf(nastyNumber), { maxLength: 3 }), { maxLength: 3 })
    })
  },
  {
    contract: Contract.job(
      "Optionals",
      Schema.Struct({
        a: Schema.optional(Schema.Number),
        b: Schema.optionalKey(Schema.String),
        c: Schema.NullOr(Schema.Boolean),
        d: Schema.Number.pipe(Schema.withDecodingDefaultType(Effect.succeed(7))),
        e: Schema.UndefinedOr(Schema.String)
      })
    ),
    values: fc.record(
      { a: leaf(nastyNumber), b: leaf(nastyString), c: fc.oneof(fc.boolean(), fc.constant(null)), d: leaf(nastyNumber), e: fc.oneof(fc.constant(undefined), nastyString) },
      { requiredKeys: ["c"] }
    )
  },
  {
    contract: Contract.job(
      "Unions",
      Schema.Union([
        Schema.TaggedStruct("Card", { last4: Schema.String, amount: Schema.Number }),
        Schema.TaggedStruct("Bank", { iban: Schema.String, amounts: Schema.Array(Schema.Number) }),
        Schema.TaggedStruct("Gift", { code: Schema.NullOr(Schema.String) })
      ])
    ),
    values: fc.oneof(
      fc.record({ _tag: fc.constant("Card"), last4: leaf(nastyString), amount: leaf(nastyNumber) }),
      fc.record({ _tag: fc.constant("Bank"), iban: leaf(nastyString), amounts: fc.array(leaf(nastyNumber), { maxLength: 4 }) }),
      fc.record({ _tag: fc.constant("Gift"), code: fc.oneof(fc.constant(null), nastyString) })
    )
  },
  {
    contract: Contract.job(
      "Branded",
      Schema.Struct({
        customerId: Schema.String.check(Schema.isMinLength(1)).pipe(Schema.brand("CustomerId")),
        cents: Schema.Number.check(Schema.isInt()).pipe(Schema.brand("Cents")),
        big: Schema.BigIntFromString,
        bigSelf: Schema.optional(Schema.BigInt)
      })
    ),
    values: fc.record(
      { customerId: leaf(nastyString), cents: leaf(nastyNumber), big: leaf(fc.bigInt()), bigSelf: fc.bigInt() },
      { requiredKeys: ["customerId", "cents", "big"] }
    )
  },
  {
    contract: Contract.job("Sparse", Schema.Struct({ xs: Schema.Array(Schema.UndefinedOr(Schema.Number)), ys: Schema.Array(Schema.Unknown) })),
    values: fc.record({
      xs: fc.array(fc.oneof(fc.constant(undefined), nastyNumber), { maxLength: 4 }),
      ys: fc.array(fc.oneof(fc.jsonValue(), fc.constant(undefined), nastyNumber, nastyString, nastyDate), { maxLength: 4 })
    })
  }
]

/**
 * One schema's property on one store: every generated value is enqueued; each enqueue must either
 * fail with InvalidPayload or succeed; then a worker runs every accepted job, and each handler must
 * have received a value equal (schema equivalence) to the one enqueued, and no job may fail.
 */
const property = (c: Case, runs: number, storeLayer: () => Layer.Layer<JobStore, unknown>) => {
  const received = new Map<string, unknown>()
  const handler = Handler.job(c.contract, (payload: unknown, info) => Effect.sync(() => void received.set(info.jobId, payload)))
  const schemaEquivalent = Schema.toEquivalence(c.contract.schema)
  const equivalent = (a: unknown, b: unknown) => schemaEquivalent(a, b) || sameData(a, b)
  return Effect.gen(function* () {
    const publisher = yield* Publisher.Publisher
    const accepted: Array<{ readonly id: string; readonly value: unknown }> = []
    let rejected = 0
    const samples = fc.sample(c.values, { numRuns: runs })
    for (const value of samples) {
      const exit = yield* Effect.exit(publisher.enqueue(c.contract, value))
      if (Exit.isSuccess(exit)) accepted.push({ id: exit.value, value })
      else {
        const failure = Option.getOrUndefined(Cause.findErrorOption(exit.cause))
        expect(exit.cause.reasons.length === 1 && Cause.isFailReason(exit.cause.reasons[0]!) && failure?._tag, `${c.contract.name}: a third outcome for ${fc.stringify(value)}: ${exit.cause.toString()}`).toBe("InvalidPayload")
        expect(failure!.message).toMatch(new RegExp(`^Publisher\\.enqueue: ${c.contract.name}[.\\[:]`))
        rejected++
      }
    }
    yield* Effect.scoped(Effect.andThen(Worker.make({ concurrency: 4, pollInterval: "5 millis" }), drained(60_000, "5 millis")))
    for (const { id, value } of accepted) {
      const d = yield* detail(id)
      expect({ id, state: d.job.state, log: d.logs.at(-1)?.message }).toEqual({ id, state: "Succeeded", log: d.logs.at(-1)?.message })
      expect(received.has(id)).toBe(true)
      const got = received.get(id)
      expect(equivalent(got as any, value as any), `${c.contract.name}: enqueued ${fc.stringify(value)}, received ${fc.stringify(got)}`).toBe(true)
    }
    return { accepted: accepted.length, rejected }
  }).pipe(
    Effect.provide(Publisher.layer.pipe(Layer.provideMerge(Registry.layer({ handlers: [handler] })), Layer.provideMerge(storeLayer())))
  )
}

describe("payload round trip: enqueue rejects with InvalidPayload, or the handler receives an equal value", () => {
  for (const [storeName, storeLayer] of stores) {
    const runs = storeName === "memory" ? RUNS : PG_RUNS
    for (const c of cases) {
      it.live(`${c.contract.name} on ${storeName} (${runs} values)`, () =>
        property(c, runs, storeLayer).pipe(
          Effect.tap(({ accepted, rejected }) => Effect.sync(() => console.log(`${c.contract.name}/${storeName}: ${accepted} accepted, ${rejected} rejected`)))
        ),
        120_000
      )
    }
  }
})
