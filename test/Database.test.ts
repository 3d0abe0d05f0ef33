import { describe, expect, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import { Database } from "warp-effect"
import { serverUrl } from "./support/db.js"

describe("Database layer", () => {
  it.live("names the host and the environment variable when PostgreSQL is unreachable", () =>
    Effect.gen(function* () {
      const err = yield* Effect.flip(
        Layer.build(Database.layerFromEnv("WARP_TEST_URL", { connectTimeout: "2 seconds" })).pipe(
          Effect.scoped,
          Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnvRecord({ WARP_TEST_URL: "postgres://postgres@127.0.0.1:1/nope" }))
        )
      )
      expect(err._tag).toBe("DatabaseUnreachable")
      expect(err.message).toContain("127.0.0.1:1")
      expect(err.message).toContain("WARP_TEST_URL")
    }))

  it.live("says the variable is not set", () =>
    Effect.gen(function* () {
      const err = yield* Effect.flip(
        Layer.build(Database.layerFromEnv("WARP_TEST_URL")).pipe(Effect.scoped, Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnvRecord({})))
      )
      expect(err.message).toContain("WARP_TEST_URL is not set")
    }))

  it.live("connects when the server is there", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql`SELECT 1 AS one`
      expect(rows[0]).toEqual({ one: 1 })
    }).pipe(Effect.provide(Database.layer(serverUrl()))))
})
