/**
 * The filtered, paged read of jobs in the PostgreSQL store (the dashboard's job list).
 */
import type * as SqlClient from "effect/sql/SqlClient"
import type * as Statement from "effect/sql/Statement"
import * as Effect from "effect/Effect"
import { JobState } from "../../job/JobState.js"
import { isStorableId, isWindow, type JobFilter, type JobPage } from "../JobStore.js"
import type { StoreError } from "../StoreError.js"
import { fail, rowToJob } from "./shared.js"

/** The WHERE clause of a filter, or undefined when no row can match it. */
const filterSql = (sql: SqlClient.SqlClient, f: JobFilter): Statement.Fragment | undefined => {
  const clauses: Array<Statement.Fragment> = [sql`TRUE`]
  for (const text of [f.id, f.type, f.keyPrefix, f.jobKey]) if (text !== undefined && !isStorableId(text)) return undefined
  for (const d of [f.createdAfter, f.createdBefore]) if (d !== undefined && Number.isNaN(d.getTime())) return undefined
  if (f.minPriority !== undefined && Number.isNaN(f.minPriority)) return undefined
  if (f.state !== undefined) {
    if (!JobState.literals.includes(f.state)) return undefined
    clauses.push(sql`state = ${f.state}`)
  }
  if (f.states !== undefined) {
    const states = f.states.filter((s) => JobState.literals.includes(s))
    if (states.length === 0) return undefined
    clauses.push(sql`state IN (SELECT jsonb_array_elements_text(${JSON.stringify(states)}::jsonb))`)
  }
  if (f.id !== undefined) clauses.push(sql`id = ${f.id}`)
  if (f.type !== undefined) clauses.push(sql`type = ${f.type}`)
  if (f.jobKey !== undefined) clauses.push(sql`job_key = ${f.jobKey}`)
  // a plain prefix: starts_with treats % and _ as characters (no LIKE pattern is built from input)
  if (f.keyPrefix !== undefined) clauses.push(sql`starts_with(metadata #>> '{policies,concurrency,value,key}', ${f.keyPrefix})`)
  if (f.createdAfter !== undefined) clauses.push(sql`created_at >= ${f.createdAfter.toISOString()}::timestamptz`)
  if (f.createdBefore !== undefined) clauses.push(sql`created_at < ${f.createdBefore.toISOString()}::timestamptz`)
  // as text cast to numeric: any number (a fraction, ±Infinity) compares as the memory store compares it
  if (f.minPriority !== undefined) clauses.push(sql`priority >= ${String(f.minPriority)}::numeric`)
  return sql.and(clauses)
}

/** `JobStoreService.list`: the jobs matching the filter, newest first, one window of them; `total` counts every match. */
export const list = (
  sql: SqlClient.SqlClient,
  { limit, offset, ...filter }: JobFilter & { readonly limit: number; readonly offset: number }
): Effect.Effect<JobPage, StoreError> =>
  Effect.gen(function* () {
    const where = filterSql(sql, filter)
    // a filter no row can match (an unknown state, text PostgreSQL cannot hold, an invalid date)
    // matches none; a window that is not whole numbers >= 0 holds none
    if (where === undefined) return { rows: [], total: 0 }
    if (!isWindow(limit, offset)) {
      const total = yield* sql`SELECT count(*)::int AS n FROM warp_jobs WHERE ${where}`
      return { rows: [], total: Number((total[0] as any).n) }
    }
    const rows = yield* sql`SELECT * FROM warp_jobs WHERE ${where} ORDER BY id DESC LIMIT ${limit} OFFSET ${offset}`
    const total = yield* sql`SELECT count(*)::int AS n FROM warp_jobs WHERE ${where}`
    return { rows: rows.map(rowToJob), total: Number((total[0] as any).n) }
  }).pipe(Effect.mapError(fail("list")))
