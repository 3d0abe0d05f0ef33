import { describe, expect, expectTypeOf, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as SqlClient from "effect/sql/SqlClient"
import { spawnSync } from "node:child_process"
import {
  Contract,
  GlobalPolicies,
  Handler,
  Publisher,
  Retry,
  Semaphore,
  SemaphoreProvider,
  SemaphoreProviderMemory,
  Warp
} from "warp-effect"
import { createDatabase, dropDatabase, freshPgLayer } from "./support/db.js"
import { HolderCounter } from "./support/holders.js"
import { detail, drained } from "./support/runtime.js"

const Work = Contract.job("WarpWork", Schema.Struct({ i: Schema.Number }), { policy: [Semaphore("warp-layer", 2)] })

class Mailer extends Context.Service<Mailer, { readonly send: (n: number) => Effect.Effect<void> }>()("test/Mailer") {}

describe("Warp.layer", () => {
  it("its type names what it needs: a SqlClient, the handlers' services, a custom provider's", () => {
    const plain = Warp.layer({ handlers: [Handler.job(Work, () => Effect.void)] })
    expectTypeOf(plain).toEqualTypeOf<Layer.Layer<Warp.Services, Warp.BuildError, SqlClient.SqlClient>>()
    const needsMailer = Warp.layer({ handlers: [Handler.job(Work, ({ i }) => Effect.flatMap(Mailer, (m) => m.send(i)))] })
    expectTypeOf(needsMailer).toEqualTypeOf<Layer.Layer<Warp.Services, Warp.BuildError, SqlClient.SqlClient | Mailer>>()
    class Tenant extends Context.Service<Tenant, { readonly id: string }>()("test/Tenant") {}
    const custom: Layer.Layer<SemaphoreProvider.SemaphoreProvider, "provider down", Tenant> = Layer.effect(
      SemaphoreProvider.SemaphoreProvider,
      Effect.andThen(Tenant, SemaphoreProviderMemory.make)
    )
    const withProvider = Warp.layer({ handlers: [], semaphoreProvider: custom })
    expectTypeOf(withProvider).toEqualTypeOf<Layer.Layer<Warp.Services, Warp.BuildError | "provider down", SqlClient.SqlClient | Tenant>>()
  })

  it.live("on PostgreSQL: migrates, runs the worker with the concurrency addon (cap held), stops with the Layer", () => {
    const holders = new HolderCounter()
    const handler = Handler.job(Work, () => holders.hold("warp-layer", Effect.sleep("15 millis")))
    return Effect.gen(function* () {
      const publisher = yield* Publisher.Publisher
      const ids = yield* Effect.forEach(Array.from({ length: 12 }, (_, i) => i), (i) => publisher.enqueue(Work, { i }))
      yield* drained(30_000)
      for (const id of ids) expect((yield* detail(id)).job.state).toBe("Succeeded")
      expect(holders.max.get("warp-layer")).toBe(2)
    }).pipe(Effect.provide(Warp.layer({ handlers: [handler], worker: { concurrency: 6, pollInterval: "5 millis" } }).pipe(Layer.provideMerge(freshPgLayer(30)))))
  })

  it.live("worker: false publishes without running anything", () =>
    Effect.gen(function* () {
      const publisher = yield* Publisher.Publisher
      const id = yield* publisher.enqueue(Work, { i: 1 })
      yield* Effect.sleep("100 millis") // a worker would have claimed it (poll 5 ms) by now
      expect((yield* detail(id)).job.state).toBe("Enqueued")
    }).pipe(Effect.provide(Warp.layerMemory({ handlers: [Handler.job(Work, () => Effect.void)], worker: false })))
  )

  it.live("global defaults are read at every attempt: a Retry set while the worker runs applies to the next job", () => {
    const Flaky = Contract.job("WarpFlaky", Schema.Struct({ i: Schema.Number }))
    const runs = new Map<number, number>()
    const handler = Handler.job(Flaky, ({ i }) =>
      Effect.suspend(() => {
        runs.set(i, (runs.get(i) ?? 0) + 1)
        return Effect.fail("boom")
      })
    )
    return Effect.gen(function* () {
      const publisher = yield* Publisher.Publisher
      const first = yield* publisher.enqueue(Flaky, { i: 1 })
      yield* drained(10_000)
      expect((yield* detail(first)).job.state).toBe("Failed")
      expect(runs.get(1)).toBe(1)
      yield* (yield* GlobalPolicies.GlobalPolicies).set([Retry(3, { initialDelay: "1 millis" })])
      const second = yield* publisher.enqueue(Flaky, { i: 2 })
      yield* drained(10_000)
      expect((yield* detail(second)).job.state).toBe("Failed")
      expect(runs.get(2)).toBe(3)
      // never stamped: the row carries no retry policy
      expect((yield* detail(second)).job.metadata).not.toHaveProperty("policies.retry")
    }).pipe(Effect.provide(Warp.layerMemory({ handlers: [handler], worker: { concurrency: 1, pollInterval: "5 millis" } })))
  })

  it("the README quick start runs as written against PostgreSQL and sees its job Succeeded", async () => {
    const url = await createDatabase()
    try {
      const run = spawnSync(process.execPath, ["--import", "tsx", "examples/readme/quickstart.ts"], {
        env: { ...process.env, DATABASE_URL: url },
        encoding: "utf8",
        timeout: 60_000
      })
      expect(run.status, run.stderr).toBe(0)
      expect(run.stdout + run.stderr).toMatch(/invoice for 123/)
      expect(run.stdout + run.stderr).toMatch(/job [0-9a-f-]+: Succeeded/)
    } finally {
      await dropDatabase(url)
    }
  })
})
