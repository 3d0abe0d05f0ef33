/**
 * Effect's own durable queue: `@effect/sql/SqlPersistedQueue` (the store) behind
 * `@effect/experimental/PersistedQueue` (the typed queue), on `@effect/sql-pg`. It is the queue an
 * Effect user would try first. It has no concurrency keys, no per-key limits and no dedupe by key
 * (an `offer` with an id already in the table is dropped, which is not a per-key gate), so it runs
 * the keyless scenario only.
 *
 * How it works (0.52.1): one table (`effect_queue`); `offer` inserts one row per call (there is no
 * bulk offer); per queue name and process one poller claims as many rows as there are waiting
 * `take` callers in one `UPDATE ... WHERE sequence IN (SELECT ... ORDER BY updated_at, sequence
 * FOR UPDATE SKIP LOCKED LIMIT n)`, hands them to the takers through a mailbox and polls again
 * once they are all taken; a taken element is marked completed by its own `UPDATE` when the
 * handler's scope closes (the row stays, `completed = true`). `@effect/experimental` is a peer
 * dependency of `@effect/sql`, so it is installed with the root's `npm ci`.
 */
import * as PersistedQueue from "@effect/experimental/PersistedQueue"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlPersistedQueue from "@effect/sql/SqlPersistedQueue"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { diffCounters, readCounters, withClient } from "../lib/server.js"
import { type BacklogResult, type BacklogSpec, Holders, waitUntil } from "./common.js"

export const name = "effect SqlPersistedQueue"

const QUEUE = "bench"
const Payload = Schema.Struct({ i: Schema.Number })

/**
 * Its best reasonable settings for the bench: poll every `pollMs` (the others' 100 ms; its default
 * is 1 s; the interval only matters when a poll comes back empty), lock expiry and refresh at their
 * defaults (2 min, 30 s: no job here runs that long), `maxAttempts` at its default (10).
 */
const layer = (url: string, maxConnections: number, pollMs: number) =>
  PersistedQueue.layer.pipe(
    Layer.provideMerge(SqlPersistedQueue.layerStore({ pollInterval: pollMs })),
    Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections, idleTimeout: "30 seconds" }))
  )

/**
 * Writes the backlog as `offer` writes each row (a random uuid id, the queue name, the JSON-encoded
 * element, `completed = false`, `attempts = 0`, `created_at = updated_at = NOW()`), 2,000 rows a
 * statement: `offer` has no bulk form, and the backlog is written before the measured window anyway.
 */
const insertBacklog = (jobs: number) =>
  Effect.gen(function* () {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    for (let start = 0; start < jobs; start += 2000) {
      const n = Math.min(2000, jobs - start)
      const ids = Array.from({ length: n }, () => crypto.randomUUID())
      const elements = Array.from({ length: n }, (_, k) => JSON.stringify({ i: start + k }))
      yield* sql`
        INSERT INTO effect_queue (id, queue_name, element, completed, attempts, created_at, updated_at)
        SELECT id, ${QUEUE}, element, FALSE, 0, NOW(), NOW()
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
  // the store makes its table and indexes when its layer is built
  await Effect.runPromise(insertBacklog(spec.jobs).pipe(Effect.provide(layer(url, 4, spec.pollMs))))
  const before = await readCounters(url)
  let elapsedMs = 0
  await Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const queue = yield* PersistedQueue.make({ name: QUEUE, schema: Payload })
        const t0 = performance.now()
        const lane = queue
          .take(() =>
            Effect.acquireUseRelease(
              Effect.sync(() => holders.enter(undefined)),
              () => (spec.handlerMs > 0 ? Effect.sleep(spec.handlerMs) : Effect.void),
              () => Effect.sync(() => holders.exit(undefined))
            )
          )
          .pipe(Effect.forever)
        const lanes = yield* Effect.forEach(Array.from({ length: spec.workers }), () => Effect.fork(lane))
        elapsedMs = yield* Effect.promise(() => waitUntil(() => holders.completed >= spec.jobs, spec.capMs, t0))
        yield* Fiber.interruptAll(lanes)
      })
    ).pipe(Effect.provide(layer(url, spec.workers + 2, spec.pollMs)))
  )
  const after = await readCounters(url)
  const succeeded = await withClient(url, async (c) => Number((await c.query(`SELECT count(*)::int AS n FROM effect_queue WHERE completed`)).rows[0].n))
  return { completed: holders.completed, elapsedMs, maxHolders: holders.max, requeues: 0, succeeded, db: diffCounters(before, after) }
}
