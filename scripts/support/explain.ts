/**
 * EXPLAIN (ANALYZE, BUFFERS) of a statement inside a transaction that is rolled back, so that the
 * statement's writes (a claim's updates) do not stay: the plan scripts' shared helper.
 */
import * as Effect from "effect/Effect"
import type * as SqlClient from "effect/sql/SqlClient"

class Rollback {
  readonly _tag = "Rollback"
  constructor(readonly plan: string) {}
}

/** The plan of `text` with `params`, as the server ran it (`COSTS OFF`), its writes rolled back. */
export const explain = (sql: SqlClient.SqlClient, text: string, params: ReadonlyArray<unknown>) =>
  sql
    .withTransaction(
      Effect.flatMap(sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${text}`, params as Array<unknown>), (r) =>
        Effect.fail(new Rollback(r.map((x) => x["QUERY PLAN"]).join("\n")))
      )
    )
    .pipe(Effect.catch((e) => (e instanceof Rollback ? Effect.succeed(e.plan) : Effect.fail(e))))
