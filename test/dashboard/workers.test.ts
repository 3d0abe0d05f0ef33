/**
 * The workers page over HTTP: a live worker with the slot its running handler holds, a stale one
 * flagged (not heard from for more than three heartbeats), text escaped, and a stopped worker gone.
 */
import * as SqlClient from "effect/sql/SqlClient"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import { describe, expect, it } from "vitest"
import { Concurrency, Contract, Handler, Publisher, Semaphore, Worker } from "warp-effect"
import { JobStore } from "../../src/internal/store/JobStore.js"
import { pgWorkerEnv } from "../support/env.js"
import * as F from "./fixture.js"

const Slow = Contract.job("Slow", Schema.Struct({ n: Schema.Number }), { policy: [Semaphore("export-api", 2)] })

describe("Workers page", () => {
  it("lists a live worker with the slots it holds, flags a stale one, and forgets a stopped one", async () => {
    const started = Deferred.makeUnsafe<void>()
    const release = Deferred.makeUnsafe<void>()
    const handler = Handler.job(Slow, () => Effect.andThen(Deferred.succeed(started, undefined), Deferred.await(release)))
    const runtime = ManagedRuntime.make(pgWorkerEnv([handler], 10))
    const context = await runtime.runPromise(Effect.context<any>())
    const app = { context, run: (e: any) => runtime.runPromise(e), seeded: undefined as never, dispose: () => runtime.dispose() }
    const server = await F.serve(app as F.App<any>)
    const scope = await runtime.runPromise(Scope.make())
    try {
      await runtime.runPromise(
        Effect.gen(function* () {
          yield* Effect.flatMap(Publisher.Publisher, (p) => p.enqueue(Slow, { n: 1 }))
          yield* Worker.make({ addons: [Concurrency.addon], concurrency: 2, pollInterval: "10 millis", lease: "600 millis", workerId: "worker-a" }).pipe(
            Scope.provide(scope)
          )
          yield* Deferred.await(started)
          // the next report (every 200 ms) carries the running handler's slot
          const store = yield* JobStore
          for (let i = 0; i < 200; i++) {
            const ws = yield* store.workers
            if (ws.some((w) => w.slots.length === 1)) break
            yield* Effect.sleep("20 millis")
          }
          // a worker that stopped reporting five minutes ago (killed, or cut off from the database)
          yield* store.reportWorker({ workerId: "ghost-<b>x</b>", host: "h", pid: 1, lanes: 4, inFlight: 0, slots: [], heartbeatMs: 10_000 })
          const sql = yield* SqlClient.SqlClient
          yield* sql`UPDATE warp_workers SET seen_at = now() - interval '5 minutes' WHERE id = 'ghost-<b>x</b>'`
        })
      )
      const body = await (await fetch(`${server.url}/workers`)).text()
      expect(body).toContain("2 workers registered")
      expect(body).toContain("1 stale worker")
      expect(body).toContain("worker-a")
      expect(body).toMatch(/export-api<\/a> × 1/)
      expect(body).toContain("ghost-&lt;b&gt;x&lt;/b&gt;")
      expect(body).not.toContain("ghost-<b>")
      // the ghost's row is flagged, worker-a's is live
      const rows = body.split("<tr").slice(2)
      expect(rows.find((r) => r.includes("worker-a"))).toContain("live")
      expect(rows.find((r) => r.includes("ghost-"))).toMatch(/stale<\/span> 5 min 0\d s ago/)
      expect(body).toContain('href="/warp/workers" class="active"')

      await runtime.runPromise(Deferred.succeed(release, undefined))
      await runtime.runPromise(Scope.close(scope, Exit.void))
      const after = await (await fetch(`${server.url}/workers`)).text()
      expect(after).toContain("1 worker registered")
      expect(after).not.toContain("worker-a")
    } finally {
      await server.close()
      await runtime.dispose()
    }
  })
})
