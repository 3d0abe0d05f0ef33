/**
 * The read of the sharded counters (`warp_counters`) of the PostgreSQL store.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type { StoreError } from "../StoreError.js"
import { fail } from "./shared.js"

/** `JobStoreService.counters`: every counter, as the sum of its shards. */
export const counters = (sql: SqlClient.SqlClient): Effect.Effect<ReadonlyMap<string, number>, StoreError> =>
  sql`SELECT key, sum(value)::bigint AS value FROM warp_counters GROUP BY key`.pipe(
    Effect.map((rows) => new Map((rows as Array<any>).map((r) => [String(r.key), Number(r.value)]))),
    Effect.mapError(fail("counters"))
  )
