/**
 * Effect's own durable queue: `PersistedQueue` of `effect/persistence/PersistedQueue` (Effect 4.1; in
 * Effect 3 it was `@effect/experimental/PersistedQueue` on `@effect/sql/SqlPersistedQueue`) with its
 * SQL store (`PersistedQueue.layerStoreSql`), on `@effect/sql-pg`. It is the queue an Effect user would
 * try first. It has no concurrency keys, no per-key limits and no dedupe by key (an `offer` with an id
 * already in the table is dropped, which is not a per-key gate), so it runs the keyless scenario only.
 *
 * How it works (effect 4.1.5): one table (`effect_queue`, made by its own migrations, table
 * `effect_queue_migrations`); `offer` inserts one row per call (there is no bulk offer); per queue name
 * and process one poller claims as many rows as there are waiting `take` callers in one
 * `WITH cte AS (UPDATE ... WHERE sequence IN (SELECT ... ORDER BY visible_at, sequence FOR UPDATE SKIP
 * LOCKED LIMIT n) RETURNING ...)`, hands them to the takers through a queue and polls again once they
 * are all taken; a taken element is marked completed (`state = 'completed'`, the row stays) by its own
 * `UPDATE` when the handler's scope closes.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as PersistedQueue from "effect/persistence/PersistedQueue"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import { diffCounters, readCounters, withClient } from "../lib/server.js"
import { cpuWindow, databaseOf, serverCpu } from "../lib/serverCpu.js"
import { type BacklogResult, type BacklogSpec, Holders, measurePickups, type PickupResult, type PickupSpec, Signals, waitUntil } from "./common.js"

export const name = "effect PersistedQueue (SQL store)"

const QUEUE = "bench"
const Payload = Schema.Struct({ i: Schema.Number })

/**
 * Its best reasonable settings for the bench: poll every `pollMs` (the others' 100 ms; its default
 * is 1 s; the interval only matters when a poll comes back empty), lock expiry and refresh at their
 * defaults (2 min, 30 s: no job here runs that long), `maxAttempts` at its default (10).
 */
const layer = (url: string, maxConnections: number, pollMs: number) =>
  PersistedQueue.layer.pipe(
    Layer.provideMerge(PersistedQueue.layerStoreSql({ pollInterval: pollMs })),
    Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections, idleTimeout: "30 seconds" }))
  )

/**
 * Writes the backlog as `offer` writes each row (a random uuid id, the queue name, the JSON-encoded
 * element, `state = 'pending'`, `attempts = 0`, `visible_at = created_at = updated_at = NOW()`), 2,000
 * rows a statement: `offer` has no bulk form, and the backlog is written before the measured window anyway.
 */
const insertBacklog = (jobs: number) =>
  Effect.gen(function* () {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    for (let start = 0; start < jobs; start += 2000) {
      const n = Math.min(2000, jobs - start)
      const ids = Array.from({ length: n }, () => crypto.randomUUID())
      const elements = Array.from({ length: n }, (_, k) => JSON.stringify({ i: start + k }))
      yield* sql`
        INSERT INTO effect_queue (id, queue_name, element, state, attempts, visible_at, created_at, updated_at)
        SELECT id, ${QUEUE}, element, 'pending', 0, NOW(), NOW(), NOW()
        FROM unnest(${ids}::text[], ${elements}::text[]) WITH ORDINALITY AS t(id, element, n)
        ORDER BY n`
    }
  })

/** Drains a keyless backlog with `spec.workers` fibers, each taking one element at a time. */
export const backlog = async (url: string, spec: BacklogSpec): Promise<BacklogResult> => {
  for (let i = 0; i < spec.jobs; i++) {
    if (spec.keyOf(i) !== undefined) throw new Error(`${name} has no concurrency keys: it runs the keyless scenario only`)
  }
  const holders = new Holders()
  const server = await serverCpu(url)
  const inserting = cpuWindow(server)
  // the store makes its table and indexes when its layer is built
  await Effect.runPromise(insertBacklog(spec.jobs).pipe(Effect.provide(layer(url, 4, spec.pollMs))))
  const serverCpuInsertMs = inserting.end().serverCpuMs
  const before = await readCounters(url)
  let elapsedMs = 0
  let cpuMs = 0
  let serverCpuMs = 0
  let databaseCpuMs = 0
  await Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const queue = yield* PersistedQueue.make({ name: QUEUE, schema: Payload })
        const t0 = performance.now()
        const window = cpuWindow(server, databaseOf(url))
        const lane = queue
          .take(() =>
            Effect.acquireUseRelease(
              Effect.sync(() => holders.enter(undefined)),
              () => (spec.handlerMs > 0 ? Effect.sleep(spec.handlerMs) : Effect.void),
              () => Effect.sync(() => holders.exit(undefined))
            )
          )
          .pipe(Effect.forever)
        const lanes = yield* Effect.forEach(Array.from({ length: spec.workers }), () => Effect.forkChild(lane))
        elapsedMs = yield* Effect.promise(() => waitUntil(() => holders.completed >= spec.jobs, spec.capMs, t0))
        ;({ cpuMs, serverCpuMs, databaseCpuMs } = window.end())
        yield* Fiber.interruptAll(lanes)
      })
    ).pipe(Effect.provide(layer(url, spec.workers + 2, spec.pollMs)))
  )
  const after = await readCounters(url)
  const succeeded = await withClient(url, async (c) => Number((await c.query(`SELECT count(*)::int AS n FROM effect_queue WHERE state = 'completed'`)).rows[0].n))
  return { completed: holders.completed, elapsedMs, maxHolders: holders.max, requeues: 0, succeeded, cpuMs, serverCpuMs, databaseCpuMs, serverCpuInsertMs, db: diffCounters(before, after) }
}

/**
 * Pickup latency on idle lanes (scenario 13): `workers` fibers each `take` in a loop, the store polling
 * every 100 ms as in the backlog runs (its default is 1 s), idle for 500 ms; an element is `offer`ed to
 * its taker's start. It has no keys: the handoff part is n/a.
 */
export const pickup = async (url: string, spec: PickupSpec): Promise<PickupResult> => {
  const signals = new Signals()
  const PickupPayload = Schema.Struct({ k: Schema.Number })
  return Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const queue = yield* PersistedQueue.make({ name: QUEUE, schema: PickupPayload })
        const lane = queue.take(({ k }) => Effect.sync(() => signals.mark(`start:${k}`))).pipe(Effect.forever)
        const lanes = yield* Effect.forEach(Array.from({ length: spec.workers }), () => Effect.forkChild(lane))
        yield* Effect.sleep("500 millis")
        const result = yield* Effect.promise(() => measurePickups(spec, signals, (k) => Effect.runPromise(queue.offer({ k }))))
        yield* Fiber.interruptAll(lanes)
        return result
      })
    ).pipe(Effect.provide(layer(url, spec.workers + 2, 100)))
  )
}
