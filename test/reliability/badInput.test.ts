/**
 * Bad-input sweep, on PostgreSQL with the concurrency addon: limits and keys that no execution path
 * can honour are rejected everywhere they can enter (declaration, enqueue, admin override,
 * provider); hand-corrupted rows fail their own job with a clear audit entry while the worker keeps
 * running and other jobs are unaffected; losing the database connections mid-run loses nothing.
 */
import { describe, expect, it } from "@effect/vitest"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import pg from "pg"
import {
  Concurrency,
  Contract,
  Handler,
  JobParameters,
  JobStorePg,
  Mutex,
  Publisher,
  Registry,
  Semaphore,
  SemaphoreProviderMemory,
  SemaphoreProviderPg,
  Worker
} from "warp-effect"
import { cancelledText, LOCK_PREFIX } from "../../src/internal/concurrency/ConcurrencyBehavior.js"
import { ConcurrencyLimitManager } from "../../src/internal/concurrency/ConcurrencyLimitManager.js"
import { lockId } from "../../src/internal/semaphore/lockId.js"
import { SemaphoreProvider, type SemaphoreProviderService, slotName } from "../../src/internal/semaphore/SemaphoreProvider.js"
import { JobStore } from "../../src/internal/store/JobStore.js"
import { checkOverlaps, type Interval, type Termination } from "../soak/intervals.js"
import { createDatabase, dropDatabase, freshDatabaseUrl, freshPgLayer, serverUrl } from "../support/db.js"
import { HolderCounter } from "../support/holders.js"
import { detail, drained } from "../support/runtime.js"

const Task = Contract.job("Task", Schema.Struct({ key: Schema.NullOr(Schema.String), ms: Schema.Number }))

/** Handler runs per job id, and holders per key. */
class Probe {
  readonly runs = new Map<string, number>()
  readonly holders = new HolderCounter()
  readonly handler = Handler.job(Task, ({ key, ms }, info) => {
    const body = Effect.sync(() => this.runs.set(info.jobId, (this.runs.get(info.jobId) ?? 0) + 1)).pipe(Effect.andThen(Effect.sleep(ms)))
    return key === null ? body : this.holders.hold(key, body)
  })
}

/** The stack under test on one database: PgClient (tagged with `applicationName`), store, provider, addon. */
const stack = (url: string, handler: Handler.JobHandler<any, any, never>, applicationName = "warp-bad-input", provider?: Layer.Layer<SemaphoreProvider, never, SqlClient.SqlClient>) =>
  Publisher.layer.pipe(
    Layer.provideMerge(Registry.layer({ handlers: [handler] })),
    Layer.provideMerge(Concurrency.layer),
    Layer.provideMerge(provider ?? SemaphoreProviderPg.layer({ pingInterval: "50 millis" })),
    Layer.provideMerge(JobStorePg.layer),
    Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections: 24, applicationName, idleTimeout: "30 seconds" }))
  )

/** A fresh database for one test, with the stack on it. */
const onFreshDatabase = <A, E>(probe: Probe, body: (url: string) => Effect.Effect<A, E, any>) =>
  Effect.scoped(Effect.flatMap(freshDatabaseUrl, (url) => Effect.provide(body(url), stack(url, probe.handler)))) as Effect.Effect<A, unknown>

const advisoryLocks = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`
).pipe(Effect.map((r) => r[0]!.n))

const jobCount = Effect.flatMap(JobStore, (s) => s.countByState).pipe(Effect.map((c) => Object.values(c).reduce((a, b) => a + b, 0)))

/** A bad concurrency limit is refused at every entrance, and a row carrying one fails its own job. */
const rejectsLimit = (limit: number, providerRejects: boolean) =>
  Effect.gen(function* () {
    const rule = `limit must be an integer >= 1 and at most 2147483647, got ${limit}`
    expect(() => Semaphore("k", limit)).toThrow(`Semaphore("k", ${limit}): ${rule}`)
    const viaParams = JobParameters.make().withSemaphore("k", limit)
    expect(viaParams.error?._tag).toBe("InvalidPolicy")
    expect(viaParams.error?.message).toBe(`JobParameters.withSemaphore("k", ${limit}, "Wait"): ${rule}`)
    const viaConfigure = JobParameters.make().configure(Concurrency.ConcurrencyMetadata, (m) => {
      m.key = "k"
      m.limit = limit
    })
    expect(viaConfigure.error?._tag).toBe("InvalidPolicy")
    expect(viaConfigure.error?.message).toBe(`JobParameters.configure(ConcurrencyMetadata): ${rule}`)

    const p = yield* Publisher.Publisher
    expect((yield* Effect.flip(p.enqueue(Task, { key: "k", ms: 0 }, viaParams))).message).toBe(viaParams.error?.message)
    expect(yield* jobCount).toBe(0)

    const limits = yield* ConcurrencyLimitManager
    const refused = yield* Effect.flip(limits.addOrUpdateLimit("k", limit))
    expect(refused._tag).toBe("InvalidPolicy")
    expect(refused.message).toBe(`ConcurrencyLimitManager.addOrUpdateLimit("k", ${limit}): ${rule.replace("limit", "slots")}`)
    expect(yield* limits.list).toEqual([])

    // providers refuse what is not an integer >= 1; a huge integer is theirs to serve (the policy
    // layer is what refuses it), and serving it must not cost work per slot
    const pgProvider = yield* SemaphoreProvider
    const memory = yield* SemaphoreProviderMemory.make
    for (const provider of [pgProvider, memory]) {
      const result = yield* Effect.result(Effect.scoped(provider.tryAcquire("warp:concurrency:k", limit, 0)))
      if (providerRejects) {
        expect(Result.isFailure(result) && result.failure._tag).toBe("SemaphoreError")
        expect(Result.isFailure(result) && result.failure.message).toMatch(/integer >= 1/)
      } else {
        expect(Result.isSuccess(result) && Option.isSome(result.success)).toBe(true)
      }
    }
    expect(yield* advisoryLocks).toBe(0)

    // the same limit written into a row by hand: the job fails with a clear entry, others run
    const store = yield* JobStore
    const raw = JSON.stringify({ policies: { concurrency: { source: "enqueue", value: { key: "k", limit, mode: "Wait" } } } })
    yield* store.insert([{ id: "bad-limit", type: "Task", handler: null, payload: { key: "k", ms: 0 }, state: "Enqueued", scheduleTime: new Date(), metadata: JSON.parse(raw) }])
    const good = yield* p.enqueue(Task, { key: "k", ms: 0 }, JobParameters.make().withSemaphore("k", 2))
    yield* Effect.scoped(Effect.andThen(Worker.make({ addons: [Concurrency.addon], concurrency: 2, pollInterval: "10 millis" }), drained()))
    const bad = yield* detail("bad-limit")
    expect(bad.job.state).toBe("Failed")
    expect(bad.logs.at(-1)!.message).toMatch(/^Job metadata is invalid: /)
    expect((yield* detail(good)).job.state).toBe("Succeeded")
  })

describe("bad input: concurrency limits", () => {
  for (const [name, limit, providerRejects] of [
    ["0", 0, true],
    ["negative", -3, true],
    ["fractional", 1.5, true],
    ["NaN", Number.NaN, true],
    ["Infinity", Number.POSITIVE_INFINITY, true],
    ["huge (2^31)", 2 ** 31, false],
    ["huge (2^53)", 2 ** 53, false]
  ] as const) {
    it.live(`limit ${name} is rejected at declaration, enqueue and admin override${providerRejects ? " and by the providers" : ""}; a row carrying it fails alone`, () => {
      const probe = new Probe()
      return onFreshDatabase(probe, () => rejectsLimit(limit, providerRejects))
    })
  }

  it.live("above the PostgreSQL whole-scan size (8,192 slots) the last free slot is found and a full key is detected", () =>
    Effect.gen(function* () {
      const provider = yield* SemaphoreProvider
      const sql = yield* SqlClient.SqlClient
      const name = "warp:concurrency:wide"
      const limit = 9000
      const free = Math.floor(Math.random() * limit)
      const others = Array.from({ length: limit }, (_, i) => i).filter((i) => i !== free)
      // another session holds every slot but one
      const holder = yield* sql.reserve
      yield* holder.executeUnprepared(`SELECT count(pg_advisory_lock(id)) FROM unnest($1::bigint[]) AS id`, [`{${others.map((i) => lockId(slotName(name, i))).join(",")}}`], undefined)
      yield* Effect.scoped(
        Effect.gen(function* () {
          const slot = yield* provider.tryAcquire(name, limit, 0)
          expect(Option.map(slot, (s) => s.index)).toEqual(Option.some(free))
          expect(Option.isNone(yield* Effect.scoped(provider.tryAcquire(name, limit, 0))), "full").toBe(true)
        })
      )
      yield* holder.executeUnprepared(`SELECT pg_advisory_unlock_all()`, [], undefined)
      expect(yield* advisoryLocks).toBe(0)
    }).pipe(Effect.scoped, Effect.provide(Layer.provideMerge(SemaphoreProviderPg.layer(), freshPgLayer(6))))
  )

  it.live("the largest accepted limit (2^31 - 1) runs: acquiring a slot does not cost work per slot", () => {
    const probe = new Probe()
    return onFreshDatabase(probe, () =>
      Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const ids = yield* Effect.forEach([1, 2, 3], () => p.enqueue(Task, { key: "wide", ms: 20 }, JobParameters.make().withSemaphore("wide", 2 ** 31 - 1)))
        yield* Effect.scoped(Effect.andThen(Worker.make({ addons: [Concurrency.addon], concurrency: 3, pollInterval: "10 millis" }), drained(20_000)))
        for (const id of ids) expect((yield* detail(id)).job.state).toBe("Succeeded")
        expect(yield* advisoryLocks).toBe(0)
      })
    ).pipe(Effect.timeoutOrElse({ duration: "40 seconds", orElse: () => Effect.fail(new Error("a job with limit 2^31 - 1 did not finish")) }))
  })
})

describe("bad input: concurrency keys", () => {
  it.live("empty, whitespace-only, NUL-carrying and 10 kB keys are rejected at declaration, enqueue and admin override", () => {
    const probe = new Probe()
    return onFreshDatabase(probe, () =>
      Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const limits = yield* ConcurrencyLimitManager
        const ruleOf = (key: string) =>
          key.includes("\u0000")
            ? "key must not contain a NUL character (PostgreSQL cannot store it)"
            : key.length > 512
              ? "key must be at most 512 characters"
              : "key must not be empty or whitespace"
        for (const key of ["", "   ", "\t\n", "a\u0000b", "x".repeat(10_240)]) {
          const shown = key.length > 512 ? `"${"x".repeat(23)}… (10240 characters)` : JSON.stringify(key)
          expect(() => Mutex(key)).toThrow(`Mutex(${shown}): ${ruleOf(key)}, got `)
          expect(() => Semaphore(key, 2)).toThrow(`Semaphore(${shown}, 2): ${ruleOf(key)}, got `)
          const params = JobParameters.make().withMutex(key)
          expect(params.error?._tag).toBe("InvalidPolicy")
          expect(params.error?.message).toMatch(`JobParameters.withMutex(${shown}, "Skip"): ${ruleOf(key)}, got `)
          expect((yield* Effect.flip(p.enqueue(Task, { key, ms: 0 }, params)))._tag).toBe("InvalidPolicy")
          const refused = yield* Effect.flip(limits.addOrUpdateLimit(key, 2))
          expect(refused._tag).toBe("InvalidPolicy")
          expect(refused.message).toMatch(`ConcurrencyLimitManager.addOrUpdateLimit(${shown}, 2): ${ruleOf(key)}, got `)
        }
        // the same values in a payload: a NUL cannot be stored (was a StoreError), NaN would come back null
        expect((yield* Effect.flip(p.enqueue(Task, { key: "a\u0000b", ms: 0 }))).message).toBe(
          `Publisher.enqueue: Task.key: must not contain a NUL character (PostgreSQL cannot store it), got "a\\u0000b"`
        )
        expect((yield* Effect.flip(p.enqueue(Task, { key: null, ms: Number.NaN }))).message).toBe(
          `Publisher.enqueue: Task.ms: expected a finite number (JSON cannot carry NaN or Infinity), got NaN`
        )
        expect(yield* jobCount).toBe(0)
        expect(yield* limits.list).toEqual([])
        // the boundary: 512 characters is accepted
        expect(Mutex("k".repeat(512)).value.key.length).toBe(512)
      })
    )
  })

  it.live("non-ASCII keys are accepted and enforced: one holder at a time, the surplus Deleted with the exact text", () => {
    const probe = new Probe()
    const key = "ключ:東京/ñ🙂"
    return onFreshDatabase(probe, () =>
      Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const ids = yield* Effect.forEach(Array.from({ length: 6 }), () => p.enqueue(Task, { key, ms: 150 }, JobParameters.make().withMutex(key)))
        yield* Effect.scoped(Effect.andThen(Worker.make({ addons: [Concurrency.addon], concurrency: 6, pollInterval: "10 millis" }), drained()))
        expect(probe.holders.max.get(key)).toBe(1)
        const states = yield* Effect.forEach(ids, (id) => detail(id))
        const deleted = states.filter((d) => d.job.state === "Deleted")
        expect(deleted.length).toBeGreaterThan(0)
        expect(states.filter((d) => d.job.state === "Succeeded").length).toBe(ids.length - deleted.length)
        for (const d of deleted) expect(d.logs.at(-1)!.message).toBe(`Cancelled — '${key}' full (1 slots)`)
        expect(deleted[0]!.logs.at(-1)!.message).toBe(cancelledText(key, 1))
        // stamped on the row as given
        expect((states[0]!.job.metadata as any).policies.concurrency.value.key).toBe(key)
        expect(yield* advisoryLocks).toBe(0)
      })
    )
  })
})

/** Inserts a row of `Task` with raw `metadata`, bypassing every validation. */
const insertRaw = (id: string, metadata: unknown, type = "Task") =>
  Effect.flatMap(JobStore, (s) =>
    s.insert([{ id, type, handler: null, payload: { key: "shared", ms: 5 }, state: "Enqueued", scheduleTime: new Date(), metadata: { policies: {} } }])
  ).pipe(
    Effect.andThen(
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE warp_jobs SET metadata = ${JSON.stringify(metadata)}::jsonb WHERE id = ${id}`)
    )
  )

/** Hand-corrupted rows fail their own job with `expected`; valid jobs (same key included) all succeed. */
const corruptRows = (probe: Probe, rows: ReadonlyArray<readonly [string, unknown]>, expected: RegExp) =>
  Effect.gen(function* () {
    const p = yield* Publisher.Publisher
    for (const [id, metadata] of rows) yield* insertRaw(id, metadata)
    const good = yield* Effect.forEach(Array.from({ length: 8 }), (_, i) =>
      p.enqueue(Task, { key: i % 2 === 0 ? "shared" : null, ms: 5 }, i % 2 === 0 ? JobParameters.make().withSemaphore("shared", 2) : JobParameters.make())
    )
    yield* Effect.scoped(Effect.andThen(Worker.make({ addons: [Concurrency.addon], concurrency: 3, pollInterval: "10 millis" }), drained()))
    for (const [id] of rows) {
      const d = yield* detail(id)
      expect({ id, state: d.job.state }).toEqual({ id, state: "Failed" })
      expect(d.logs.at(-1)!.kind).toBe("Failed")
      expect(d.logs.at(-1)!.message, id).toMatch(expected)
      expect(probe.runs.get(id), `${id} never reached its handler`).toBeUndefined()
    }
    for (const id of good) expect((yield* detail(id)).job.state).toBe("Succeeded")
    expect(yield* advisoryLocks).toBe(0)
  })

describe("bad input: hand-corrupted metadata rows", () => {
  it.live("invalid JSON shapes (array, string, number, null, policies not an object) fail the job; the worker keeps running", () => {
    const probe = new Probe()
    return onFreshDatabase(probe, () =>
      corruptRows(
        probe,
        [
          ["shape-array", [1, 2, 3]],
          ["shape-string", "concurrency"],
          ["shape-number", 42],
          ["shape-null", null],
          ["shape-policies-number", { policies: 5 }],
          ["shape-no-policies", { stampedAt: "2024-01-01T00:00:00Z" }]
        ],
        /^Job metadata is invalid: /
      )
    )
  })

  it.live("an unknown policy family fails the job with the family named", () => {
    const probe = new Probe()
    return onFreshDatabase(probe, () =>
      corruptRows(
        probe,
        [
          ["family-priority", { policies: { priority: { source: "enqueue", value: { level: 1 } } } }],
          ["family-extra-top-level", { policies: {}, concurrency: { key: "shared", limit: 1 } }]
        ],
        /^Job metadata is invalid: [\s\S]*(priority|concurrency)/
      )
    )
  })

  it.live("wrong types inside a known family fail the job (string limit, limit 0, unknown mode, empty key, unknown source, missing key)", () => {
    const probe = new Probe()
    const concurrency = (value: unknown, source = "enqueue") => ({ policies: { concurrency: { source, value } } })
    return onFreshDatabase(probe, () =>
      corruptRows(
        probe,
        [
          ["type-limit-string", concurrency({ key: "shared", limit: "2", mode: "Wait" })],
          ["type-limit-zero", concurrency({ key: "shared", limit: 0, mode: "Wait" })],
          ["type-mode", concurrency({ key: "shared", limit: 2, mode: "Sometimes" })],
          ["type-key-empty", concurrency({ key: "", limit: 2, mode: "Wait" })],
          ["type-key-number", concurrency({ key: 7, limit: 2, mode: "Wait" })],
          ["type-source", concurrency({ key: "shared", limit: 2, mode: "Wait" }, "admin")],
          ["type-missing-key", concurrency({ limit: 2, mode: "Wait" })],
          ["type-stamped-at", { policies: {}, stampedAt: 17 }]
        ],
        /^Job metadata is invalid: /
      )
    )
  })

  it.live("an unknown contract fails its job without touching its concurrency slot; the worker keeps running", () => {
    const probe = new Probe()
    return onFreshDatabase(probe, () =>
      Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        yield* insertRaw("unknown-contract", { policies: { concurrency: { source: "enqueue", value: { key: "shared", limit: 1, mode: "Wait" } } } }, "NoSuchContract")
        const good = yield* Effect.forEach([1, 2, 3], () => p.enqueue(Task, { key: "shared", ms: 5 }, JobParameters.make().withMutex("shared", "Wait")))
        yield* Effect.scoped(Effect.andThen(Worker.make({ addons: [Concurrency.addon], concurrency: 2, pollInterval: "10 millis" }), drained()))
        const d = yield* detail("unknown-contract")
        expect(d.job.state).toBe("Failed")
        expect(d.logs.at(-1)!.message).toMatch(/^Unknown job type 'NoSuchContract'/)
        for (const id of good) expect((yield* detail(id)).job.state).toBe("Succeeded")
        expect(yield* advisoryLocks).toBe(0)
      })
    )
  })
})

/**
 * Wall time in fractional milliseconds. The overlap check counts an entry before an exit at the same
 * instant, so with whole milliseconds two runs one after the other under one slot (a chain of slot
 * reuse, whose next run starts within the millisecond its previous one ended) read as overlapping.
 */
const preciseNow = () => performance.timeOrigin + performance.now()

/**
 * When each slot acquisition was taken (set by the recording provider below), by slot name, index and
 * fencing token: the handler of the attempt finds its own acquisition from its `info.slot`. (Effect 4
 * has no fiber-local `FiberRef.set` that outlives the region it is set in, so the acquisition, not the
 * fiber, carries the instant.)
 */
type TakenAt = Map<string, number>
const acquisition = (name: string, index: number, fence: bigint | undefined) => `${name}#${index}#${fence ?? ""}`

/** Wraps a provider so the holder knows when its slot was taken. */
const recordingProvider = (takenAt: TakenAt) => (inner: SemaphoreProviderService): SemaphoreProviderService => ({
  tryAcquire: (name, limit, timeout) =>
    Effect.tap(inner.tryAcquire(name, limit, timeout), (slot) =>
      Option.isSome(slot)
        ? Effect.map(Clock.currentTimeMillis, (now) => {
            takenAt.set(acquisition(name, slot.value.index, slot.value.fence), now)
          })
        : Effect.void
    )
})

const Timed = Contract.job("Timed", Schema.Struct({ key: Schema.NullOr(Schema.String), limit: Schema.Number, ms: Schema.Number }))

/**
 * A worker (in this process, its connections tagged `warp-victim`) runs keyless, Semaphore(2) Wait
 * and Mutex Wait jobs while `fault` strikes its connections. Checked: everything succeeds exactly
 * once, nothing lost, no lock left, and at no instant more than N handlers of a key whose slot was
 * still held (handlers whose connection was terminated under them are reported apart: the window
 * before `slot.lost` fires).
 */
const underConnectionLoss = (fault: (admin: pg.Client, dbName: string) => Promise<void>, faults: number) =>
  Effect.gen(function* () {
    const url = yield* Effect.acquireRelease(Effect.promise(createDatabase), (u) => Effect.promise(() => dropDatabase(u)))
    const dbName = new URL(url).pathname.slice(1)
    const intervals: Array<Interval> = []
    const terminations: Array<Termination> = []
    const takenAt: TakenAt = new Map()
    const handler = Handler.job(Timed, ({ key, limit, ms }, info) =>
      Effect.gen(function* () {
        const slot = info.slot
        const taken = slot === undefined ? 0 : (takenAt.get(acquisition(LOCK_PREFIX + slot.key, slot.index, slot.fence)) ?? 0)
        const entered = preciseNow()
        yield* Effect.sleep(ms).pipe(
          Effect.ensuring(
            Effect.sync(() =>
              intervals.push({
                jobId: info.jobId,
                attempt: info.attempt,
                key,
                limit,
                proc: "victim",
                pid: 0,
                claimedAt: taken,
                entered,
                exited: preciseNow(),
                exitSource: "recorded",
                result: null
              })
            )
          )
        )
      })
    )
    const provider = Layer.effect(SemaphoreProvider, Effect.map(SemaphoreProviderPg.make({ pingInterval: "50 millis" }), recordingProvider(takenAt)))
    const admin = new pg.Client({ connectionString: url, application_name: "warp-admin" })
    yield* Effect.acquireRelease(Effect.promise(() => admin.connect()), () => Effect.promise(() => admin.end()))
    admin.on("error", () => {})

    return yield* Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      const ids: Array<string> = []
      for (let i = 0; i < 160; i++) {
        const kind = i % 4
        ids.push(
          kind === 0 || kind === 1
            ? yield* p.enqueue(Timed, { key: null, limit: 0, ms: 10 }, JobParameters.make())
            : kind === 2
              ? yield* p.enqueue(Timed, { key: "sem", limit: 2, ms: 15 }, JobParameters.make().withSemaphore("sem", 2))
              : yield* p.enqueue(Timed, { key: "mutex", limit: 1, ms: 15 }, JobParameters.make().withMutex("mutex", "Wait"))
        )
      }
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Worker.make({ addons: [Concurrency.addon], concurrency: 6, pollInterval: "10 millis", lease: "5 seconds" })
          for (let f = 0; f < faults; f++) {
            yield* Effect.sleep("250 millis")
            terminations.push({ pid: 0, at: preciseNow(), keys: ["sem", "mutex"] })
            yield* Effect.promise(() => fault(admin, dbName))
          }
          // the test reads through the victim's pool too: a poll hit by a fault is retried
          yield* drained(60_000).pipe(Effect.retry({ times: 100, schedule: Schedule.spaced("50 millis") }))
        })
      )
      for (const id of ids) {
        const d = yield* detail(id)
        expect({ id, state: d.job.state }).toEqual({ id, state: "Succeeded" })
        expect(d.logs.filter((l) => l.kind === "Succeeded").length).toBe(1)
      }
      const store = yield* JobStore
      expect((yield* store.counters).get("stats:succeeded")).toBe(ids.length)
      expect(yield* advisoryLocks).toBe(0)
      const reports = checkOverlaps(intervals, terminations)
      const violations = reports.reduce((n, r) => n + r.violations, 0)
      const lost = reports.reduce((n, r) => n + r.afterLostSlot, 0)
      console.log(
        `connection loss: ${faults} faults, ${intervals.length} handler runs for ${ids.length} jobs, violations ${violations} (after a lost slot ${lost})`
      )
      expect(violations, reports.flatMap((r) => r.examples).join("\n")).toBe(0)
    }).pipe(Effect.provide(stack(url, handler, "warp-victim", provider)), Effect.provideService(References.MinimumLogLevel, "Error"))
  })

const terminateAll = (admin: pg.Client, dbName: string) =>
  admin
    .query(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'warp-victim'`, [dbName])
    .then(() => {})

describe("bad input: database connection loss mid-run", () => {
  it.live("pg_terminate_backend of all the worker's connections, 6 times: the worker recovers, nothing lost, nothing twice", () =>
    Effect.scoped(underConnectionLoss(terminateAll, 6))
  )

  it.live("connections refused for 2 s (database closed to new connections, all terminated): workers back off, retry and recover", () =>
    Effect.scoped(
      underConnectionLoss(async (_admin, dbName) => {
        // the outage is driven from the server's maintenance database (this one refuses connections)
        const server = new pg.Client({ connectionString: serverUrl() })
        await server.connect()
        try {
          await server.query(`ALTER DATABASE ${dbName} WITH ALLOW_CONNECTIONS false`)
          await server.query(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'warp-victim'`, [dbName])
          await new Promise((resolve) => setTimeout(resolve, 2_000))
        } finally {
          await server.query(`ALTER DATABASE ${dbName} WITH ALLOW_CONNECTIONS true`)
          await server.end()
        }
      }, 1)
    )
  )
})

