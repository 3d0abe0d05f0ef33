/**
 * Pickup latency (issue 40, deliverable 5: instant pickup; goals: enqueue → handler start on an idle
 * worker p50 ≤ 2 ms, p99 ≤ 10 ms; a Wait job starts ≤ 5 ms after its key's slot frees). One worker on
 * PostgreSQL (the built-in store and provider, `Database.layer`, 4 lanes, default poll interval 100 ms),
 * in this process, on a fresh database of `DATABASE_URL`'s server (else the local one), measured twice:
 * `before` (the store's `instantPickup: false`: the worker learns of due work by polling) and `after`
 * (the default: LISTEN/NOTIFY hints and the Scheduled-row timer).
 *
 * 1. Enqueue → start: `TRIES` (default 200) jobs, one at a time on an idle worker: each is enqueued a
 *    random 5–40 ms after the previous one ended (so that the poll's phase is sampled evenly), and timed
 *    from the moment `enqueue` returned to the moment its handler began (`performance.now()`, both in
 *    this process; a handler that starts before `enqueue` has returned counts 0).
 * 2. Wait job after its key's slot frees: `WAIT_TRIES` (default 100) tries, each on a key of its own (a
 *    Mutex, Wait mode): a holder starts; a second job of the key is enqueued, claimed by another lane,
 *    found full and requeued (its audit trail says so), and the lanes settle (20 ms); then the holder's
 *    handler is let go. Timed from the holder's handler ending (its last instruction) to the waiting job's
 *    handler beginning; also from the holder's finalizing write returning (the store call, seen by a
 *    wrapper around the store) to that start. The latter is the figure of the goal: the slot frees in that
 *    write (the built-in provider's release is fused into it); the former adds the write itself.
 * 3. What the notifications cost producers (run first, before the worker starts): `INSERTS` (default
 *    5,000) enqueues from `PRODUCERS` (default 32) concurrent fibers, as single enqueues (batched into
 *    shared statements) and each inside a transaction of its own (a NOTIFY serializes commits).
 *
 *   npm run pickup-latency              (MODE=before | after to run one; TRIES, WAIT_TRIES)
 *
 * 4. The floor under 1 (`FLOOR=0` skips it): a bare `pg` client's `NOTIFY` to another's receipt, timed from
 *    the send — PostgreSQL's and the driver's part, on the same machine under the same load.
 *
 * A figure, not a test: it prints p50 / p90 / p99 / max per mode.
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import { Concurrency, Contract, Database, Handler, JobParameters, JobStorePg, Publisher, Registry, SemaphoreProviderPg, Worker } from "warp-effect"
import { JobStore, type JobStoreService } from "../src/internal/store/JobStore.js"
import pg from "pg"
import { admin, base, urlOf } from "./support/server.js"

const TRIES = Number(process.env.TRIES ?? 200)
const WAIT_TRIES = Number(process.env.WAIT_TRIES ?? 100)
const INSERTS = Number(process.env.INSERTS ?? 5000)
const PRODUCERS = Number(process.env.PRODUCERS ?? 32)
const MODES = (process.env.MODE ?? "before,after").split(",") as Array<"before" | "after">

const Ping = Contract.job("PickupPing", Schema.Struct({ i: Schema.Number }))
const Hold = Contract.job("PickupHold", Schema.Struct({ i: Schema.Number, hold: Schema.Boolean }))

/** What the handlers and the store wrapper record, per try. */
const pingStarted = new Map<number, Deferred.Deferred<number>>()
const holdStarted = new Map<string, Deferred.Deferred<number>>()
const holdRelease = new Map<number, Deferred.Deferred<void>>()
const holdEnded = new Map<number, number>()
const holderIds = new Map<string, number>()
const written = new Map<number, number>()
const get = <K, A>(m: Map<K, Deferred.Deferred<A>>, k: K) => {
  let d = m.get(k)
  if (d === undefined) m.set(k, (d = Deferred.makeUnsafe<A>()))
  return d
}

const handlers = [
  Handler.job(Ping, ({ i }) => Deferred.succeed(get(pingStarted, i), performance.now())),
  Handler.job(Hold, ({ hold, i }) =>
    Effect.gen(function* () {
      yield* Deferred.succeed(get(holdStarted, `${i}:${hold}`), performance.now())
      if (hold) {
        yield* Deferred.await(get(holdRelease, i))
        holdEnded.set(i, performance.now())
      }
    })
  )
]

/** The store, with the return of each holder's finalizing write timed. */
const timed = Layer.effect(
  JobStore,
  Effect.map(JobStore, (store): JobStoreService => ({
    ...store,
    finalize: (f) =>
      store.finalize(f).pipe(
        Effect.tap(() =>
          Effect.sync(() => {
            const i = holderIds.get(f.job.id)
            if (i !== undefined && f.handlerRan !== false) written.set(i, performance.now())
          })
        )
      )
  }))
)

const percentile = (xs: ReadonlyArray<number>, p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!
}
const f = (x: number) => `${x.toFixed(2)} ms`
const summary = (xs: ReadonlyArray<number>) =>
  `p50 ${f(percentile(xs, 50))}, p90 ${f(percentile(xs, 90))}, p99 ${f(percentile(xs, 99))}, max ${f(Math.max(...xs))} (n=${xs.length})`

const measure = (mode: "before" | "after", url: string) => {
  const env = Publisher.layer.pipe(
    Layer.provideMerge(Registry.layer({ handlers })),
    Layer.provideMerge(Concurrency.layer),
    Layer.provideMerge(SemaphoreProviderPg.layer()),
    Layer.provideMerge(timed),
    Layer.provideMerge(JobStorePg.layerWith({ instantPickup: mode === "after" })),
    Layer.provideMerge(Database.layer(url, { maxConnections: 20 }))
  )
  return Effect.gen(function* () {
    for (const m of [pingStarted, holdStarted, holdRelease, holdEnded, holderIds, written]) m.clear()
    const publisher = yield* Publisher.Publisher
    const store = yield* JobStore
    const sql = yield* SqlClient.SqlClient
    // 3 (first, with no worker): what the notifications cost producers
    const rate = (n: number, one: (i: number) => Effect.Effect<unknown, unknown>) =>
      Effect.gen(function* () {
        const t0 = performance.now()
        yield* Effect.forEach(Array.from({ length: n }, (_, i) => i), one, { concurrency: PRODUCERS, discard: true })
        const ms = performance.now() - t0
        yield* sql`DELETE FROM warp_jobs`
        return Math.round((n * 1000) / ms)
      })
    const batched = yield* rate(INSERTS, (i) => publisher.enqueue(Ping, { i: -1 - i }))
    const inTx = yield* rate(INSERTS, (i) => sql.withTransaction(publisher.enqueue(Ping, { i: -1 - i })))
    yield* Worker.make({ addons: [Concurrency.addon], concurrency: 4 })
    yield* Effect.sleep("300 millis")
    // 1. enqueue → start
    const pickup: Array<number> = []
    const fromCall: Array<number> = []
    for (let i = 0; i < TRIES; i++) {
      yield* Effect.sleep(5 + Math.floor(Math.random() * 36))
      const called = performance.now()
      yield* publisher.enqueue(Ping, { i })
      const returned = performance.now()
      const began = yield* Deferred.await(get(pingStarted, i))
      pickup.push(Math.max(0, began - returned))
      fromCall.push(began - called)
    }
    // 2. a Wait job after its key's slot frees
    const afterEnd: Array<number> = []
    const afterWrite: Array<number> = []
    for (let i = 0; i < WAIT_TRIES; i++) {
      const params = JobParameters.make().withMutex(`pickup-wait:${mode}:${i}`, "Wait")
      const holder = yield* publisher.enqueue(Hold, { i, hold: true }, params)
      holderIds.set(holder, i)
      yield* Deferred.await(get(holdStarted, `${i}:true`))
      const waiting = yield* publisher.enqueue(Hold, { i, hold: false }, params)
      // claimed by another lane, found full, requeued
      while (true) {
        const d = yield* store.get(waiting)
        if (Option.isSome(d) && d.value.logs.some((l) => l.kind === "Requeued")) break
        yield* Effect.sleep("2 millis")
      }
      yield* Effect.sleep("20 millis")
      yield* Deferred.succeed(get(holdRelease, i), undefined)
      const began = yield* Deferred.await(get(holdStarted, `${i}:false`))
      afterEnd.push(began - holdEnded.get(i)!)
      const w = written.get(i)
      if (w !== undefined) afterWrite.push(began - w)
    }
    console.log(`[${mode}] enqueue returned → handler start, ${TRIES} jobs one at a time on an idle worker: ${summary(pickup)}`)
    console.log(`[${mode}]   (from the enqueue call: ${summary(fromCall)})`)
    console.log(`[${mode}] Wait job: holder's handler end → waiting job's handler start, ${WAIT_TRIES} keys: ${summary(afterEnd)}`)
    if (afterWrite.length > 0) console.log(`[${mode}]   (from the holder's finalizing write returning: ${summary(afterWrite)})`)
    console.log(`[${mode}] enqueue rate, ${INSERTS} jobs from ${PRODUCERS} concurrent producers, no worker: ${batched} jobs/s (batched statements); ${inTx} jobs/s (each in a transaction of its own)`)
  }).pipe(Effect.scoped, Effect.provide(env))
}

/**
 * The floor under figure 1, on the same server and machine: from sending `NOTIFY` (autocommit) on one
 * bare `pg` client to its receipt on another that listens, `TRIES` times, one at a time.
 */
const floor = async (url: string): Promise<Array<number>> => {
  const listener = new pg.Client({ connectionString: url })
  const sender = new pg.Client({ connectionString: url })
  await listener.connect()
  await sender.connect()
  await listener.query("LISTEN warp_pickup_floor")
  const out: Array<number> = []
  try {
    for (let i = 0; i < TRIES; i++) {
      await new Promise((resolve) => setTimeout(resolve, 5 + Math.floor(Math.random() * 36)))
      const heard = new Promise<number>((resolve) => listener.once("notification", () => resolve(performance.now())))
      const sent = performance.now()
      await sender.query("SELECT pg_notify('warp_pickup_floor', $1)", [String(i)])
      out.push((await heard) - sent)
    }
  } finally {
    await listener.end()
    await sender.end()
  }
  return out
}

const main = async () => {
  if (process.env.FLOOR !== "0") {
    const db = `warp_pickup_floor_${Date.now().toString(36)}`
    await admin(`CREATE DATABASE ${db}`)
    try {
      console.log(`[floor] NOTIFY sent → heard by a bare pg client, ${TRIES} one at a time: ${summary(await floor(urlOf(db)))}`)
    } finally {
      await admin(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`)
    }
  }
  for (const mode of MODES) {
    const db = `warp_pickup_${mode}_${Date.now().toString(36)}`
    await admin(`CREATE DATABASE ${db}`)
    try {
      await Effect.runPromise(measure(mode, urlOf(db)))
    } finally {
      await admin(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`)
    }
  }
  console.log(`server: ${new URL(base).host}`)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
