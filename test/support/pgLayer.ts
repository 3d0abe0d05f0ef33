import * as PgClient from "@effect/sql-pg/PgClient"
import * as Redacted from "effect/Redacted"

/**
 * A PgClient on `url`. Kept apart from `db.ts` (which reads the test run's server through vitest's
 * `inject`): `npm run soak` loads the soak harness, and through it this, with plain tsx, outside vitest.
 */
export const pgLayer = (url: string, maxConnections = 20) =>
  PgClient.layer({ url: Redacted.make(url), maxConnections, idleTimeout: "30 seconds" })
