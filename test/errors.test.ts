/**
 * The public error vocabulary, one test per row of the README's "Errors" table: each asserts the
 * message a person reads (the call, the path or field, the rule, the value), that the failure is typed
 * (error channel, or thrown at declaration), and that nothing was written. Store-facing rows run on
 * both stores, PostgreSQL included: user input never comes back as a StoreError.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as HttpRouter from "effect/http/HttpRouter"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { Dashboard } from "warp-effect/dashboard"
import {
  ConcurrencyLimitManager,
  Contract,
  Handler,
  Job,
  JobParameters,
  Mutex,
  Policy,
  Publisher,
  RateLimit,
  Recurring,
  Registry,
  Retry,
  Semaphore,
  SemaphoreProviderMemory,
  Worker
} from "warp-effect"
import { JobStore } from "../src/internal/store/JobStore.js"
import { detail, drained } from "./support/runtime.js"
import { freshPgLayer } from "./support/db.js"
import { stores } from "./support/stores.js"

const SendInvoice = Contract.job(
  "SendInvoice",
  Schema.Struct({
    customerId: Schema.Number,
    lines: Schema.Array(Schema.Struct({ sku: Schema.String, qty: Schema.Number })),
    note: Schema.optional(Schema.String),
    sentAt: Schema.optional(Schema.DateFromString)
  })
)
const Raw = Contract.job("Raw", Schema.Struct({ at: Schema.Date, n: Schema.BigInt, xs: Schema.Array(Schema.UndefinedOr(Schema.Number)) }))
const Signup = Contract.message("Signup", Schema.Struct({ user: Schema.String }))
const ok = { customerId: 42, lines: [{ sku: "A-1", qty: 2 }] }

/** Catches what a declaration throws. */
const thrown = (f: () => unknown): any => {
  try {
    f()
  } catch (e) {
    return e
  }
  throw new Error("did not throw")
}

const jobCount = Effect.flatMap(JobStore, (s) => s.countByState).pipe(Effect.map((c) => Object.values(c).reduce((a, b) => a + b, 0)))

describe("InvalidPolicy: a declaration or parameter no execution path can honour", () => {
  it("at declaration: the call as written, the field, the rule and the value", () => {
    const e = thrown(() => Semaphore("payments", 0))
    expect(e).toBeInstanceOf(Policy.InvalidPolicy)
    expect(e.message).toBe(`Semaphore("payments", 0): limit must be an integer >= 1 and at most 2147483647, got 0`)
    expect(e.family).toBe("concurrency")
    expect(e.path).toEqual(["limit"])
    expect(e.value).toBe(0)
    // Schema's tree stays available for tools, not as the message
    expect(Schema.isSchemaError(e.issue)).toBe(true)
    expect(e.message).not.toMatch(/Encoded side|└─/)

    for (const [f, text] of [
      [() => Semaphore("payments", -1), `Semaphore("payments", -1): limit must be an integer >= 1 and at most 2147483647, got -1`],
      [() => Semaphore("payments", Number.NaN), `Semaphore("payments", NaN): limit must be an integer >= 1 and at most 2147483647, got NaN`],
      [() => Semaphore("payments", 1.5), `Semaphore("payments", 1.5): limit must be an integer >= 1 and at most 2147483647, got 1.5`],
      [() => Semaphore("payments", Infinity), `Semaphore("payments", Infinity): limit must be an integer >= 1 and at most 2147483647, got Infinity`],
      [() => Mutex(""), `Mutex(""): key must not be empty or whitespace, got ""`],
      [() => Mutex("a\u0000b"), `Mutex("a\\u0000b"): key must not contain a NUL character (PostgreSQL cannot store it), got "a\\u0000b"`],
      [() => Mutex("\ud800"), `Mutex("\\ud800"): key must be valid Unicode (it has an unpaired surrogate, which PostgreSQL cannot store), got "\\ud800"`],
      [() => Retry(0), `Retry(0): maxAttempts must be an integer >= 1 and at most 2147483647, got 0`],
      [() => RateLimit("api", 10, "0 millis"), `RateLimit("api", 10, "0 millis"): windowMs must be an integer >= 1 and at most 2147483647, got 0`],
      [() => Contract.job("Twice", Schema.Struct({}), { policy: [Mutex("a"), Semaphore("b", 2)] }), `contract 'Twice' declares two 'concurrency' policies; Mutex and Semaphore (and any two of one family) fill one slot — declare one`]
    ] as const) {
      expect(thrown(f).message).toBe(text)
    }
  })

  it("a 10,000-character key is shown cut, with its length", () => {
    const e = thrown(() => Mutex("x".repeat(10_000)))
    expect(e.message).toBe(
      `Mutex("xxxxxxxxxxxxxxxxxxxxxxx… (10000 characters)): key must be at most 512 characters, got "${"x".repeat(59)}… (10000 characters)`
    )
    expect(e.message.length).toBeLessThan(200)
  })

  it.live("at enqueue (JobParameters): in the error channel, naming the builder call; nothing written", () =>
    Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      const e = yield* Effect.flip(p.enqueue(SendInvoice, ok, JobParameters.make().withSemaphore("payments", 0)))
      expect(e._tag).toBe("InvalidPolicy")
      expect(e.message).toBe(`JobParameters.withSemaphore("payments", 0, "Wait"): limit must be an integer >= 1 and at most 2147483647, got 0`)
      expect(yield* jobCount).toBe(0)
    }).pipe(Effect.provide(publisherOn(stores[1]![1]())))
  )

  it.live("at the admin limit manager (PostgreSQL): the call, the field, the rule; nothing written", () =>
    Effect.gen(function* () {
      const limits = yield* ConcurrencyLimitManager.ConcurrencyLimitManager
      for (const [key, slots, text] of [
        ["payments", 0, `ConcurrencyLimitManager.addOrUpdateLimit("payments", 0): slots must be an integer >= 1 and at most 2147483647, got 0`],
        ["", 3, `ConcurrencyLimitManager.addOrUpdateLimit("", 3): key must not be empty or whitespace, got ""`],
        ["a\u0000b", 3, `ConcurrencyLimitManager.addOrUpdateLimit("a\\u0000b", 3): key must not contain a NUL character (PostgreSQL cannot store it), got "a\\u0000b"`]
      ] as const) {
        const e = yield* Effect.flip(limits.addOrUpdateLimit(key, slots))
        expect(e._tag).toBe("InvalidPolicy")
        expect(e.message).toBe(text)
      }
      expect(yield* limits.list).toEqual([])
    }).pipe(Effect.provide(ConcurrencyLimitManager.layerPg.pipe(Layer.provide(freshPgLayer(4)))))
  )
})

/** Publisher + registry (a handler for SendInvoice, two for Signup) on a store layer. */
const received: Array<unknown> = []
const handlers = [
  Handler.job(SendInvoice, (payload) => Effect.sync(() => void received.push(payload))),
  Handler.message(Signup, "welcome", () => Effect.void)
]
const publisherOn = (store: Layer.Layer<JobStore, unknown>) =>
  Publisher.layer.pipe(Layer.provideMerge(Registry.layer({ handlers })), Layer.provideMerge(store))

for (const [storeName, storeLayer] of stores) {
  describe(`InvalidPayload on ${storeName}: a payload that does not match, or would not come back from JSON`, () => {
    it.live("names the call, the path, the rule and the value; nothing written", () =>
      Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const cases: ReadonlyArray<readonly [unknown, string, ReadonlyArray<PropertyKey>]> = [
          [{ ...ok, customerId: Number.NaN }, `Publisher.enqueue: SendInvoice.customerId: expected a finite number (JSON cannot carry NaN or Infinity), got NaN`, ["customerId"]],
          [{ ...ok, customerId: -Infinity }, `Publisher.enqueue: SendInvoice.customerId: expected a finite number (JSON cannot carry NaN or Infinity), got -Infinity`, ["customerId"]],
          [{ ...ok, customerId: "42" }, `Publisher.enqueue: SendInvoice.customerId: expected number, got "42"`, ["customerId"]],
          [{ lines: [] }, `Publisher.enqueue: SendInvoice.customerId: is missing`, ["customerId"]],
          [{ ...ok, lines: [{ sku: "A", qty: 1 }, { sku: 7, qty: 1 }] }, `Publisher.enqueue: SendInvoice.lines[1].sku: expected string, got 7`, ["lines", 1, "sku"]],
          [{ ...ok, note: "a\u0000b" }, `Publisher.enqueue: SendInvoice.note: must not contain a NUL character (PostgreSQL cannot store it), got "a\\u0000b"`, ["note"]],
          [{ ...ok, note: "x\udc00" }, `Publisher.enqueue: SendInvoice.note: must be valid Unicode (it has an unpaired surrogate, which PostgreSQL cannot store), got "x\\udc00"`, ["note"]],
          [{ ...ok, sentAt: new Date(Number.NaN) }, `Publisher.enqueue: SendInvoice.sentAt: expected a valid Date, got Invalid Date`, ["sentAt"]],
          [{ ...ok, note: undefined }, `Publisher.enqueue: SendInvoice.note: is undefined: JSON drops the field, and the schema tells a missing field from an undefined one (omit the field instead), got undefined`, ["note"]]
        ]
        for (const [payload, text, path] of cases) {
          const e = yield* Effect.flip(p.enqueue(SendInvoice, payload as any))
          expect(e).toBeInstanceOf(Job.InvalidPayload)
          expect(e.message.replace(/ \(and \d+ more\)$/, "")).toBe(text)
          expect((e as Job.InvalidPayload).path).toEqual(path)
          expect((e as Job.InvalidPayload).entry).toBe("Publisher.enqueue")
        }
        const raw: ReadonlyArray<readonly [unknown, string]> = [
          [{ at: new Date(0), n: 1n, xs: [] }, `Publisher.enqueue: Raw.at: expected a JSON value: a Date is stored as a string (use Schema.DateFromString, which encodes to an ISO string, rather than Schema.Date), got Date(1970-01-01T00:00:00.000Z)`],
          [{ at: undefined, n: 1n, xs: [] }, `Publisher.enqueue: Raw.at: expected a valid Date, got undefined`],
          [{ at: new Date(0), n: 1n, xs: [1, undefined] }, `Publisher.enqueue: Raw.at: expected a JSON value: a Date is stored as a string (use Schema.DateFromString, which encodes to an ISO string, rather than Schema.Date), got Date(1970-01-01T00:00:00.000Z)`]
        ]
        for (const [payload, text] of raw) expect((yield* Effect.flip(p.enqueue(Raw, payload as any))).message).toBe(text)
        const Big = Contract.job("Big", Schema.Struct({ n: Schema.BigInt }))
        expect((yield* Effect.flip(p.enqueue(Big, { n: 12n }))).message).toBe(
          `Publisher.enqueue: Big.n: expected a JSON value (JSON has no bigint; encode it as a string, e.g. Schema.BigIntFromString), got 12n`
        )
        const Sparse = Contract.job("Sparse", Schema.Array(Schema.UndefinedOr(Schema.Number)))
        expect((yield* Effect.flip(p.enqueue(Sparse, [1, undefined]))).message).toBe(
          `Publisher.enqueue: Sparse[1]: expected a JSON value (JSON turns undefined in an array into null), got undefined`
        )
        // publish and schedule name themselves
        expect((yield* Effect.flip(p.publish(Signup, { user: "a\u0000" }))).message).toBe(
          `Publisher.publish: Signup.user: must not contain a NUL character (PostgreSQL cannot store it), got "a\\u0000"`
        )
        expect((yield* Effect.flip(p.schedule(SendInvoice, { ...ok, customerId: Number.NaN }, new Date(Date.now() + 60_000)))).message).toBe(
          `Publisher.schedule: SendInvoice.customerId: expected a finite number (JSON cannot carry NaN or Infinity), got NaN`
        )
        expect(yield* jobCount).toBe(0)
      }).pipe(Effect.provide(publisherOn(storeLayer())))
    )

    it.live("-0 is accepted as 0 (the schema's equivalence holds them equal); the handler receives 0", () =>
      Effect.gen(function* () {
        received.length = 0
        const p = yield* Publisher.Publisher
        const id = yield* p.enqueue(SendInvoice, { customerId: -0, lines: [] })
        yield* Effect.scoped(Effect.andThen(Worker.make({ pollInterval: "5 millis" }), drained()))
        expect((yield* detail(id)).job.state).toBe("Succeeded")
        expect(Object.is((received[0] as any).customerId, 0)).toBe(true)
      }).pipe(Effect.provide(publisherOn(storeLayer())))
    )

    it.live("InvalidArgument: an invalid schedule date; nothing written", () =>
      Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const e = yield* Effect.flip(p.schedule(SendInvoice, ok, new Date(Number.NaN)))
        expect(e).toBeInstanceOf(Job.InvalidArgument)
        expect(e.message).toBe(`Publisher.schedule: at must be a valid Date, got Invalid Date`)
        expect(yield* jobCount).toBe(0)
      }).pipe(Effect.provide(publisherOn(storeLayer())))
    )

    it.live("not found, never a StoreError: reads by ids no row can have, and pages that do not exist", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const p = yield* Publisher.Publisher
        yield* p.enqueue(SendInvoice, ok)
        for (const id of ["a\u0000b", "\ud800", "x".repeat(10_000), ""]) expect(Option.isNone(yield* store.get(id))).toBe(true)
        for (const [limit, offset] of [[-1, 0], [10, -5], [1.5, 0], [Number.NaN, 0], [10, Infinity]]) {
          expect(yield* store.list({ limit, offset })).toEqual({ rows: [], total: 1 })
        }
        expect((yield* store.list({ state: "Nope" as any, limit: 10, offset: 0 })).rows).toEqual([])
      }).pipe(Effect.provide(publisherOn(storeLayer())))
    )
  })
}

describe("declarations that cannot be stored", () => {
  it("a contract name with a NUL, or empty: InvalidArgument at declaration", () => {
    const e = thrown(() => Contract.job("Send\u0000Invoice", Schema.Struct({})))
    expect(e).toBeInstanceOf(Job.InvalidArgument)
    expect(e.message).toBe(`Contract.job("Send\\u0000Invoice", …): name must not contain a NUL character (PostgreSQL cannot store it), got "Send\\u0000Invoice"`)
    expect(thrown(() => Contract.message("", Schema.Struct({}))).message).toBe(`Contract.message("", …): name must not be empty, got ""`)
    // a message handler's name is stored on every child job
    const h = thrown(() => Handler.message(Signup, "wel\u0000come", () => Effect.void))
    expect(h).toBeInstanceOf(Job.InvalidArgument)
    expect(h.message).toBe(`Handler.message(Signup, "wel\\u0000come", …): name must not contain a NUL character (PostgreSQL cannot store it), got "wel\\u0000come"`)
  })

  it("a recurring job whose payload would not come back: InvalidPayload at declaration", () => {
    const e = thrown(() => Recurring.make("nightly", SendInvoice, "0 3 * * *", { ...ok, customerId: Number.NaN }))
    expect(e).toBeInstanceOf(Job.InvalidPayload)
    expect(e.message).toBe(`Recurring.make("nightly"): SendInvoice.customerId: expected a finite number (JSON cannot carry NaN or Infinity), got NaN`)
  })
})

describe("admin limit manager and dashboard: unstorable keys and ids are not found (PostgreSQL)", () => {
  it.live("get / removeLimit of a NUL key: none / false, nothing written, no LimitStoreError", () =>
    Effect.gen(function* () {
      const limits = yield* ConcurrencyLimitManager.ConcurrencyLimitManager
      expect(Option.isNone(yield* limits.get("a\u0000b"))).toBe(true)
      expect(yield* limits.removeLimit("a\u0000b")).toBe(false)
      expect(Option.isNone(yield* limits.get("\ud800"))).toBe(true)
    }).pipe(Effect.provide(ConcurrencyLimitManager.layerPg.pipe(Layer.provide(freshPgLayer(4)))))
  )

  it.live("GET /jobs/<id with NUL> answers 404 'No job with id', not 500", () =>
    Effect.gen(function* () {
      const web = HttpRouter.toWebHandler(Dashboard.router({ prefix: "" }).pipe(Layer.provideMerge(stores[1]![1]() as Layer.Layer<JobStore>)))
      try {
        const response = yield* Effect.promise(() => web.handler(new Request("http://localhost/jobs/a%00b")))
        expect(response.status).toBe(404)
        expect(yield* Effect.promise(() => response.text())).toContain("No job with id")
        // a malformed page number is a 400 page naming the problem, never a 500
        const page = yield* Effect.promise(() => web.handler(new Request("http://localhost/jobs?page=-3&state=")))
        expect(page.status).toBe(400)
        expect(yield* Effect.promise(() => web.handler(new Request("http://localhost/jobs?page=2&state="))).pipe(Effect.map((r) => r.status))).toBe(200)
      } finally {
        yield* Effect.promise(() => web.dispose())
      }
    })
  )
})

describe("SemaphoreError: a direct provider call with a limit no slot pool can have", () => {
  it.live("names the call, the slot name, the rule and the value", () =>
    Effect.gen(function* () {
      const provider = yield* SemaphoreProviderMemory.make
      const e = yield* Effect.flip(Effect.scoped(provider.tryAcquire("warp:concurrency:k", 0, 0)))
      expect(e._tag).toBe("SemaphoreError")
      expect(e.message).toBe(`SemaphoreProvider.tryAcquire("warp:concurrency:k", 0): limit must be an integer >= 1, got 0`)
      const nan = yield* Effect.flip(Effect.scoped(provider.tryAcquire("warp:concurrency:k", Number.NaN, 0)))
      expect(nan.message).toBe(`SemaphoreProvider.tryAcquire("warp:concurrency:k", NaN): limit must be an integer >= 1, got NaN`)
    })
  )
})
