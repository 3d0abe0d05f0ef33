/**
 * The count of jobs per state in the PostgreSQL store.
 */
import type * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type { JobState } from "../../job/JobState.js"
import { emptyCounts } from "../JobStore.js"
import type { StoreError } from "../StoreError.js"
import { fail } from "./shared.js"

/** `JobStoreService.countByState`: the number of rows per state (0 for a state no row is in). */
export const countByState = (sql: SqlClient.SqlClient): Effect.Effect<Readonly<Record<JobState, number>>, StoreError> =>
  sql`SELECT state, count(*)::int AS n FROM warp_jobs GROUP BY state`.pipe(
    Effect.map((rows) => {
      const out = emptyCounts()
      for (const r of rows as Array<any>) out[r.state as JobState] = Number(r.n)
      return out
    }),
    Effect.mapError(fail("countByState"))
  )
