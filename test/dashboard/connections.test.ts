/**
 * Connections per worker, on PostgreSQL: `Database.layer` names every connection
 * `warp-effect {pid}@{hostname}`, the worker's report records the name of the connection it was
 * written on, and the workers listing counts the sessions of `pg_stat_activity` carrying it. A worker
 * holding slots of the PostgreSQL provider (one connection per held slot) has that many more; sessions
 * of another process are counted for that process only; a name two processes share, or none, is
 * unknown. The workers page shows the counts.
 */
import * as SqlClient from "effect/sql/SqlClient"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import { hostname } from "node:os"
import pg from "pg"
import { describe, expect, it } from "vitest"
import { Concurrency, Contract, Database, Handler, JobStoreMemory, JobStorePg, Publisher, Registry, Semaphore, SemaphoreProviderPg, Worker } from "warp-effect"
import { JobStore } from "../../src/internal/store/JobStore.js"
import { freshDatabaseUrl } from "../support/db.js"
import * as F from "./fixture.js"

const Hold = Contract.job("Hold", Schema.Struct({ n: Schema.Number }), { policy: [Semaphore("export-api", 3)] })
const defaultName = `warp-effect ${process.pid}@${hostname()}`.slice(0, 63)

/** Sessions on the current database named `name`, counted independently of the store. */
const sessionsNamed = (name: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = ${name}`
  ).pipe(Effect.map((rows) => Number(rows[0]!.n)))

describe("connections per worker", () => {
  it("counts each worker process's connections (the PostgreSQL provider's slot connections among them) and shows them on the workers page", async () => {
    const started = Array.from({ length: 3 }, () => Deferred.makeUnsafe<void>())
    const release = Deferred.makeUnsafe<void>()
    const handler = Handler.job(Hold, ({ n }) => Effect.andThen(Deferred.succeed(started[n]!, undefined), Deferred.await(release)))
    let url = ""
    const env = Publisher.layer.pipe(
      Layer.provideMerge(Registry.layer({ handlers: [handler] })),
      Layer.provideMerge(Concurrency.layer),
      Layer.provideMerge(SemaphoreProviderPg.layer()),
      Layer.provideMerge(JobStorePg.layer),
      Layer.provideMerge(
        Layer.unwrap(
          Effect.map(freshDatabaseUrl, (u) => {
            url = u
            return Database.layer(u, { maxConnections: 12 })
          })
        )
      )
    )
    const runtime = ManagedRuntime.make(env)
    const context = await runtime.runPromise(Effect.context<any>())
    const app = { context, run: (e: any) => runtime.runPromise(e), seeded: undefined as never, dispose: () => runtime.dispose() }
    const server = await F.serve(app as F.App<any>)
    const scope = await runtime.runPromise(Scope.make())
    const others: Array<pg.Client> = []
    const rawSession = async (applicationName: string) => {
      const c = new pg.Client({ connectionString: url, application_name: applicationName })
      await c.connect()
      others.push(c)
      return c
    }
    try {
      // Database.layer names its connections warp-effect {pid}@{hostname} by default
      const name = await runtime.runPromise(
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ n: string }>`SELECT current_setting('application_name') AS n`).pipe(Effect.map((r) => r[0]!.n))
      )
      expect(name).toBe(defaultName)

      /** The worker's count, read when an independent count before and after it agree (the pool may open or close a connection meanwhile). */
      const settled = (id: string) =>
        Effect.gen(function* () {
          const store = yield* JobStore
          for (let i = 0; i < 100; i++) {
            const before = yield* sessionsNamed(defaultName)
            const w = (yield* store.workers).find((x) => x.workerId === id)
            const after = yield* sessionsNamed(defaultName)
            if (w !== undefined && before === after) return { reported: w.connections, actual: after }
            yield* Effect.sleep("20 millis")
          }
          return yield* Effect.die(new Error("the connection count did not settle"))
        })

      const idle = await runtime.runPromise(
        Effect.gen(function* () {
          yield* Worker.make({ addons: [Concurrency.addon], concurrency: 4, pollInterval: "20 millis", workerId: "worker-pg" }).pipe(Scope.provide(scope))
          return yield* settled("worker-pg")
        })
      )
      expect(idle.reported).toBe(idle.actual)
      expect(idle.reported).toBeGreaterThanOrEqual(1)

      const holding = await runtime.runPromise(
        Effect.gen(function* () {
          const p = yield* Publisher.Publisher
          for (const n of [0, 1, 2]) yield* p.enqueue(Hold, { n })
          for (const d of started) yield* Deferred.await(d)
          // the three handlers hold their slots (one reserved connection each) until released
          const sql = yield* SqlClient.SqlClient
          const slotSessions = yield* sql<{ n: number }>`
            SELECT count(DISTINCT l.pid)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
            WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database() AND a.application_name = ${defaultName}`
          return { ...(yield* settled("worker-pg")), slotSessions: Number(slotSessions[0]!.n) }
        })
      )
      // the three sessions holding the slot locks carry the worker's name, so they are in its count,
      // besides the connection(s) it polls and reports on (the pool keeps idle connections open, so the
      // count need not grow past the idle one: the slots may reuse connections that were idle)
      expect(holding.slotSessions).toBe(3)
      expect(holding.reported).toBe(holding.actual)
      expect(holding.reported).toBeGreaterThanOrEqual(holding.slotSessions + 1)

      // another process (its own name, host and pid) with exactly two sessions; a worker without a name;
      // two processes sharing one name
      await rawSession("warp-test other")
      await rawSession("warp-test other")
      await rawSession("warp-test shared")
      await runtime.runPromise(
        Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql`
            INSERT INTO warp_workers (id, host, pid, lanes, heartbeat_ms, application_name) VALUES
              ('other', 'elsewhere', 2, 1, 10000, 'warp-test other'),
              ('nameless', 'elsewhere', 3, 1, 10000, NULL),
              ('shared-a', 'h1', 4, 1, 10000, 'warp-test shared'),
              ('shared-b', 'h2', 4, 1, 10000, 'warp-test shared')`
        )
      )
      const byId = new Map((await runtime.runPromise(Effect.flatMap(JobStore, (s) => s.workers))).map((w) => [w.workerId, w.connections]))
      expect(byId.get("other")).toBe(2)
      expect(byId.get("nameless")).toBeUndefined()
      expect(byId.get("shared-a")).toBeUndefined()
      expect(byId.get("shared-b")).toBeUndefined()
      await rawSession("warp-test other")
      const other = (await runtime.runPromise(Effect.flatMap(JobStore, (s) => s.workers))).find((w) => w.workerId === "other")
      expect(other?.connections).toBe(3)

      // the page: a count per worker, "—" where it is unknown
      const body = await (await fetch(`${server.url}/workers`)).text()
      expect(body).toContain("<th class=\"num\">PG connections</th>")
      const cell = (id: string) => {
        const row = body.split("<tr").find((r) => r.includes(`title="${id}"`))
        return row?.match(/data-testid="connections">([\s\S]*?)<\/td>/)?.[1]
      }
      expect(Number(cell("worker-pg"))).toBeGreaterThanOrEqual(4)
      expect(cell("other")).toBe("3")
      expect(cell("nameless")).toContain("—")
      expect(cell("shared-a")).toContain("—")

      await runtime.runPromise(Deferred.succeed(release, undefined))
    } finally {
      await Promise.all(others.map((c) => c.end()))
      await runtime.runPromise(Deferred.succeed(release, undefined))
      await runtime.runPromise(Scope.close(scope, Exit.void))
      await server.close()
      await runtime.dispose()
    }
  })

  it("the memory store cannot tell: connections is undefined", async () => {
    const runtime = ManagedRuntime.make(JobStoreMemory.layer)
    try {
      const workers = await runtime.runPromise(
        Effect.flatMap(JobStore, (s) =>
          Effect.andThen(s.reportWorker({ workerId: "mem", host: "h", pid: 1, lanes: 2, inFlight: 0, slots: [], heartbeatMs: 1000 }), s.workers)
        )
      )
      expect(workers).toHaveLength(1)
      expect(workers[0]!.connections).toBeUndefined()
      expect("connections" in workers[0]!).toBe(true)
    } finally {
      await runtime.dispose()
    }
  })
})
