/**
 * How long a handler runs on after its slot is lost (issue 15, deliverable 2: the lost-slot interruption,
 * goal p99 ≤ 5 ms). One worker on PostgreSQL (the built-in store and provider) runs one keyed job at a
 * time whose handler waits forever; once it runs, this script ends the session holding its slot
 * (`pg_terminate_backend` of the backend that holds the slot's advisory lock, from another connection)
 * and times, in this process, from just before the terminating statement is sent to the handler's
 * interruption (its `onInterrupt`). The figure includes the terminating statement's own round trip, so it
 * bounds the window from above. `TRIES` (default 100) jobs, one after another.
 *
 *   npm run lost-slot        (DATABASE_URL's server, a temporary database; else an embedded server)
 *
 * A figure, not a test: it prints p50 / p90 / p99 / max. Every other try ends the session at once when
 * the handler starts, the others `SETTLE_MS` (default 50) later, and the two are printed apart: at its
 * start the window also holds the work around the attempt's start (the claim's and the slot's writes,
 * the previous attempt's ends), later only the loss itself. It then prints the floor under those figures,
 * measured the same way while the worker still runs: the same terminating statement against a bare `pg`
 * client holding the same kind of advisory lock, timed to the driver's own `end`/`error` event (the event
 * the provider listens to). The difference is this project's part of the window; the floor is
 * PostgreSQL's, the driver's and the process's (the statement's scan of `pg_locks`, the backend's exit,
 * the event loop's turn).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Schema from "effect/Schema"
import pg from "pg"
import { Concurrency, Contract, Database, Handler, JobParameters, JobStorePg, Publisher, Registry, SemaphoreProviderPg, Worker } from "warp-effect"
import { EmbeddedPostgres } from "warp-effect/testing"
import { lockId } from "../src/internal/semaphore/lockId.js"

const TRIES = Number(process.env.TRIES ?? 100)
const SETTLE_MS = Number(process.env.SETTLE_MS ?? 50)
/** The wait before try `i`'s termination: none for even tries, `SETTLE_MS` for odd ones. */
const settleOf = (i: number) => (i % 2 === 0 ? 0 : SETTLE_MS)

const Hold = Contract.job("LostSlotHold", Schema.Struct({ i: Schema.Number }))

/** Per try: the handler's start, then the instant (`performance.now()`) it was interrupted. */
const started = Effect.runSync(Queue.unbounded<number>())
const interrupted = Effect.runSync(Queue.unbounded<number>())

/** Tries measured: their jobs, requeued after the slot's loss, end at once when they run again. */
const measured = new Set<number>()

const handler = Handler.job(Hold, ({ i }) =>
  measured.has(i)
    ? Effect.void
    : Effect.andThen(
        Queue.offer(started, i),
        Effect.never.pipe(Effect.onInterrupt(() => Effect.andThen(Effect.sync(() => measured.add(i)), Queue.offer(interrupted, performance.now()))))
      )
)

/** Ends the session holding the advisory lock `lock` (a two-int lock, as the provider takes), from `killer`. */
const terminateHolder = (killer: pg.Client, lock: string) =>
  killer.query(
    `SELECT pg_terminate_backend(pid) AS ok FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
       AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND ((classid::bigint << 32) | objid::bigint) = $1::bigint`,
    [lock]
  )

/**
 * The floor: per try, a bare client takes the advisory lock `lock` (as `pg_advisory_lock(bigint)`
 * does: `objsubid` 1) and is terminated by {@link terminateHolder}; timed from the statement's send to
 * the client's first `end` or `error` event.
 */
const floor = async (url: string, killer: pg.Client, tries: number): Promise<Array<[settle: number, ms: number]>> => {
  const out: Array<[number, number]> = []
  for (let i = 0; i < tries; i++) {
    const lock = lockId(`warp:concurrency:lost-slot-floor:${i}:0`)
    const holder = new pg.Client({ connectionString: url })
    await holder.connect()
    await holder.query("SELECT pg_advisory_lock($1::bigint)", [lock])
    const ended = new Promise<number>((resolve) => {
      holder.on("end", () => resolve(performance.now()))
      holder.on("error", () => resolve(performance.now()))
    })
    await new Promise((resolve) => setTimeout(resolve, settleOf(i)))
    const sent = performance.now()
    const rows = await terminateHolder(killer, lock)
    if (rows.rows.length !== 1) throw new Error(`floor try ${i}: the lock is held by ${rows.rows.length} sessions`)
    out.push([settleOf(i), (await ended) - sent])
  }
  return out
}

const percentile = (xs: ReadonlyArray<number>, p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!
}

const main = async () => {
  const given = process.env.DATABASE_URL
  let url: string
  let stop: () => Promise<void>
  if (given === undefined || given === "") {
    const server = await EmbeddedPostgres.start()
    url = server.url
    stop = server.stop
  } else {
    const name = `warp_lost_slot_${Date.now().toString(36)}`
    const admin = new pg.Client({ connectionString: given })
    await admin.connect()
    await admin.query(`CREATE DATABASE ${name}`)
    await admin.end()
    const u = new URL(given)
    u.pathname = `/${name}`
    url = u.toString()
    stop = async () => {
      const c = new pg.Client({ connectionString: given })
      await c.connect()
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await c.end()
    }
  }
  const killer = new pg.Client({ connectionString: url })
  await killer.connect()
  const env = Publisher.layer.pipe(
    Layer.provideMerge(Registry.layer({ handlers: [handler] })),
    Layer.provideMerge(Concurrency.layer),
    Layer.provideMerge(SemaphoreProviderPg.layer()),
    Layer.provideMerge(JobStorePg.layer),
    Layer.provideMerge(Database.layer(url, { maxConnections: 10 }))
  )
  const windows: Array<[settle: number, ms: number]> = []
  let floors: Array<[settle: number, ms: number]> = []
  const program = Effect.gen(function* () {
    const publisher = yield* Publisher.Publisher
    yield* Worker.make({ addons: [Concurrency.addon], concurrency: 1, pollInterval: "10 millis" })
    for (let i = 0; i < TRIES; i++) {
      const key = `lost-slot:${i}`
      yield* publisher.enqueue(Hold, { i }, JobParameters.make().withMutex(key, "Wait"))
      const running = yield* Queue.take(started)
      if (running !== i) return yield* Effect.die(new Error(`try ${i}: job ${running} started instead`))
      yield* Effect.sleep(settleOf(i))
      const lock = lockId(`warp:concurrency:${key}:0`)
      const sent = performance.now()
      const rows = yield* Effect.promise(() => terminateHolder(killer, lock))
      if (rows.rows.length !== 1) return yield* Effect.die(new Error(`try ${i}: the slot of ${key} is held by ${rows.rows.length} sessions`))
      const at = yield* Queue.take(interrupted)
      windows.push([settleOf(i), at - sent])
    }
    // the floor, while the worker still runs (its lane idle, polling)
    floors = yield* Effect.promise(() => floor(url, killer, TRIES))
  })
  await Effect.runPromise(Effect.scoped(program).pipe(Effect.provide(env)))
  await killer.end()
  await stop()
  const f = (x: number) => `${x.toFixed(2)} ms`
  const summary = (xs: ReadonlyArray<number>) =>
    `p50 ${f(percentile(xs, 50))}, p90 ${f(percentile(xs, 90))}, p99 ${f(percentile(xs, 99))}, max ${f(Math.max(...xs))}`
  const of = (xs: ReadonlyArray<[number, number]>, settle: number) => xs.filter(([s]) => s === settle).map(([, ms]) => ms)
  // one class when SETTLE_MS is 0 (every try then ends the session at the handler's start)
  for (const settle of new Set([0, SETTLE_MS])) {
    const w = of(windows, settle)
    const fl = of(floors, settle)
    const when = settle === 0 ? "at the handler's start" : `${settle} ms after the handler's start`
    console.log(`lost-slot interruption ${when}, ${w.length} tries (from the terminating statement's send to the handler's interruption): ${summary(w)}`)
    console.log(`  floor, ${fl.length} tries (the same statement against a bare client holding an advisory lock, to its driver's end/error event): ${summary(fl)}`)
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
