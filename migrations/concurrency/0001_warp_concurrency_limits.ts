import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/** Admin overrides of concurrency limits (sticky across redeploys). */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE warp_concurrency_limits (
      key text PRIMARY KEY,
      slots integer NOT NULL CHECK (slots >= 1),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
})
