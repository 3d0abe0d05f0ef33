import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Sharded counters: a counter is the sum of its rows `(key, shard)`. A finalizing write bumps the
 * counters of one shard chosen at random, so no row is updated by every worker (on durable PostgreSQL a
 * single hot row serializes the finalizes of every worker on its row lock until each commit). The
 * existing rows become shard 0.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE warp_counters ADD COLUMN IF NOT EXISTS shard smallint NOT NULL DEFAULT 0`
  yield* sql`ALTER TABLE warp_counters DROP CONSTRAINT IF EXISTS warp_counters_pkey`
  yield* sql`ALTER TABLE warp_counters ADD CONSTRAINT warp_counters_pkey PRIMARY KEY (key, shard)`
})
