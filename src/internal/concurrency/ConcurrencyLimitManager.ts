/**
 * Admin overrides of concurrency limits (per key, and of total caps per group), editable at run time
 * without a redeploy. Rows are sticky:
 * they live in the database, so a deploy that declares another limit still runs with the admin's
 * until `removeLimit` — unless set with an expiry (`{ expiresAt }` or `{ expiresIn }`): from that
 * instant the override is ignored everywhere it is read (the claim, `get`, `list`), so the declared
 * limit applies again from the next pickup. Expired rows are never returned (not flagged) and are
 * purged lazily (by `list` and by writes).
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import * as Describe from "../error/Describe.js"
import { JobStore } from "../store/JobStore.js"
import * as Migrations from "../store/Migrations.js"
import { call, PolicyKey, PositiveInt, validate } from "../policy/PolicyValues.js"
import { InvalidPolicy } from "../policy/InvalidPolicy.js"

/** One admin override. */
export class ConcurrencyLimit extends Schema.Class<ConcurrencyLimit>("ConcurrencyLimit")({
  key: PolicyKey,
  slots: PositiveInt,
  updatedAt: Schema.Date,
  /** When the override stops applying; absent = sticky until removed. */
  expiresAt: Schema.optional(Schema.Date)
}) {}

/** One admin override of a total cap: the group's limit in force instead of the declared `total.limit`. */
export class ConcurrencyGroupLimit extends Schema.Class<ConcurrencyGroupLimit>("ConcurrencyGroupLimit")({
  group: PolicyKey,
  slots: PositiveInt,
  updatedAt: Schema.Date,
  /** When the override stops applying; absent = sticky until removed. */
  expiresAt: Schema.optional(Schema.Date)
}) {}

/**
 * How long an override applies: until `expiresAt`, or for `expiresIn` from the write (measured on the
 * storage's clock: PostgreSQL's `now()`, the `Clock` for the memory layer). At most one of the two;
 * neither = sticky. A write without an expiry makes an existing override sticky again.
 */
export interface LimitExpiry {
  readonly expiresAt?: Date | undefined
  readonly expiresIn?: Duration.Input | undefined
}

/** The limit table could not be read or written. */
export class LimitStoreError extends Data.TaggedError("LimitStoreError")<{ readonly operation: string; readonly cause: unknown }> {}

/** The admin limit service. */
export interface ConcurrencyLimitManagerService {
  /**
   * Sets `key`'s limit to `slots` (an integer >= 1), sticky or until an expiry (see {@link LimitExpiry}).
   * An expiry already past writes an override that is already ignored.
   */
  readonly addOrUpdateLimit: (key: string, slots: number, expiry?: LimitExpiry) => Effect.Effect<void, InvalidPolicy | LimitStoreError>
  /** Removes `key`'s override; the declared limit applies again. True when an unexpired override existed. */
  readonly removeLimit: (key: string) => Effect.Effect<boolean, LimitStoreError>
  /** Every unexpired override, ordered by key (code-unit order, the same on every layer). */
  readonly list: Effect.Effect<ReadonlyArray<ConcurrencyLimit>, LimitStoreError>
  /** One override, unless it has expired. */
  readonly get: (key: string) => Effect.Effect<Option.Option<ConcurrencyLimit>, LimitStoreError>
  /**
   * Sets the total cap of `group` (the `group` of `total: { group, limit }` declarations) to `slots`,
   * sticky or until an expiry, instead of the declared `limit`; read at each pickup of a job of the group.
   */
  readonly addOrUpdateGroupLimit: (group: string, slots: number, expiry?: LimitExpiry) => Effect.Effect<void, InvalidPolicy | LimitStoreError>
  /** Removes `group`'s override; the declared total applies again. True when an unexpired override existed. */
  readonly removeGroupLimit: (group: string) => Effect.Effect<boolean, LimitStoreError>
  /** Every unexpired group override, ordered by group (code-unit order). */
  readonly listGroupLimits: Effect.Effect<ReadonlyArray<ConcurrencyGroupLimit>, LimitStoreError>
  /** One group override, unless it has expired. */
  readonly getGroupLimit: (group: string) => Effect.Effect<Option.Option<ConcurrencyGroupLimit>, LimitStoreError>
  /**
   * True when the overrides are the rows of `warp_concurrency_limits` on the job store's database: the
   * built-in PostgreSQL store reads a claimed row's override in its claiming statement, and the gate
   * then takes it from the claim (`Job.adminLimit`) instead of calling `get`.
   */
  readonly readAtClaim?: boolean | undefined
}

/** The admin limit service tag. */
export class ConcurrencyLimitManager extends Context.Service<ConcurrencyLimitManager, ConcurrencyLimitManagerService>()(
  "warp/ConcurrencyLimitManager"
) {}

const Input = Schema.Struct({ key: PolicyKey, slots: PositiveInt })
const GroupInput = Schema.Struct({ group: PolicyKey, slots: PositiveInt })
/**
 * A key PostgreSQL cannot hold unchanged (a NUL, an unpaired surrogate, not a string) is refused by
 * every layer alike, and never found.
 */
const hasNul = (key: unknown) => typeof key !== "string" || Describe.unstorableText(key) !== undefined

/** A checked expiry: none, an instant, or a duration from the write. */
type ExpiryOf = { readonly _tag: "None" } | { readonly _tag: "At"; readonly at: Date } | { readonly _tag: "In"; readonly millis: number }

/** The input rules of one kind of override: a key's, or a group's (a total cap's). */
const checkOf =
  (entry: string, input: typeof Input | typeof GroupInput, field: "key" | "group") =>
  (name: string, slots: number, expiry?: LimitExpiry): Result.Result<ExpiryOf, InvalidPolicy> =>
    Result.flatMap(
      validate("concurrency", input as Schema.Codec<unknown>, { [field]: name, slots }, call(entry, name, slots, expiry)),
      () => checkExpiry(expiry, call(entry, name, slots, expiry))
    )

const refuse = (entry: string, field: string, rule: string, value: unknown) =>
  Result.fail(new InvalidPolicy({ family: "concurrency", message: `${entry}: ${field} ${rule}, got ${Describe.show(value)}`, entry, path: [field], value, rule }))

const checkExpiry = (expiry: LimitExpiry | undefined, entry: string): Result.Result<ExpiryOf, InvalidPolicy> => {
  if (expiry === undefined || (expiry.expiresAt === undefined && expiry.expiresIn === undefined)) return Result.succeed({ _tag: "None" })
  if (expiry.expiresAt !== undefined && expiry.expiresIn !== undefined) {
    return refuse(entry, "expiresIn", "must not be given together with expiresAt", expiry.expiresIn)
  }
  if (expiry.expiresAt !== undefined) {
    const at = expiry.expiresAt
    return at instanceof Date && Number.isFinite(at.getTime()) ? Result.succeed({ _tag: "At", at }) : refuse(entry, "expiresAt", "must be a valid Date", at)
  }
  // `fromInput` is none for what is not a duration (the field may come from untyped code)
  const d = Duration.fromInput(expiry.expiresIn as Duration.Input)
  if (Option.isNone(d) || !Duration.isFinite(d.value) || Duration.toMillis(d.value) <= 0) {
    return refuse(entry, "expiresIn", "must be a finite duration > 0", expiry.expiresIn)
  }
  return Result.succeed({ _tag: "In", millis: Duration.toMillis(d.value) })
}

/** Whether `limit` still applies at `now` (epoch millis). */
export const isLive = (limit: { readonly expiresAt?: Date | undefined }, now: number): boolean => limit.expiresAt === undefined || limit.expiresAt.getTime() > now

/** The four operations of one kind of override (a key's, or a group's), as the service names them. */
interface Overrides<A> {
  readonly addOrUpdate: (name: string, slots: number, expiry?: LimitExpiry) => Effect.Effect<void, InvalidPolicy | LimitStoreError>
  readonly remove: (name: string) => Effect.Effect<boolean, LimitStoreError>
  readonly list: Effect.Effect<ReadonlyArray<A>, LimitStoreError>
  readonly get: (name: string) => Effect.Effect<Option.Option<A>, LimitStoreError>
}

/** What tells the two kinds of override apart. */
interface Kind<A> {
  readonly check: (name: string, slots: number, expiry?: LimitExpiry) => Result.Result<ExpiryOf, InvalidPolicy>
  readonly make: (name: string, slots: number, updatedAt: Date, expiresAt: Date | undefined) => A
  readonly nameOf: (a: A) => string
  /** PostgreSQL: the table and its name column. */
  readonly table: string
  readonly column: string
  /** The operations' names, for `LimitStoreError.operation`. */
  readonly ops: { readonly addOrUpdate: string; readonly remove: string; readonly list: string; readonly get: string }
}

const keys: Kind<ConcurrencyLimit> = {
  check: checkOf("ConcurrencyLimitManager.addOrUpdateLimit", Input, "key"),
  make: (key, slots, updatedAt, expiresAt) => new ConcurrencyLimit({ key, slots, updatedAt, ...(expiresAt === undefined ? {} : { expiresAt }) }),
  nameOf: (l) => l.key,
  table: "warp_concurrency_limits",
  column: "key",
  ops: { addOrUpdate: "addOrUpdateLimit", remove: "removeLimit", list: "list", get: "get" }
}

const groups: Kind<ConcurrencyGroupLimit> = {
  check: checkOf("ConcurrencyLimitManager.addOrUpdateGroupLimit", GroupInput, "group"),
  make: (group, slots, updatedAt, expiresAt) => new ConcurrencyGroupLimit({ group, slots, updatedAt, ...(expiresAt === undefined ? {} : { expiresAt }) }),
  nameOf: (g) => g.group,
  table: "warp_concurrency_group_limits",
  column: "group_name",
  ops: { addOrUpdate: "addOrUpdateGroupLimit", remove: "removeGroupLimit", list: "listGroupLimits", get: "getGroupLimit" }
}

/** The service over the two kinds' operations. */
const serviceOf = (k: Overrides<ConcurrencyLimit>, g: Overrides<ConcurrencyGroupLimit>, readAtClaim?: boolean): ConcurrencyLimitManagerService => ({
  ...(readAtClaim === undefined ? {} : { readAtClaim }),
  addOrUpdateLimit: k.addOrUpdate,
  removeLimit: k.remove,
  list: k.list,
  get: k.get,
  addOrUpdateGroupLimit: g.addOrUpdate,
  removeGroupLimit: g.remove,
  listGroupLimits: g.list,
  getGroupLimit: g.get
})

/** One kind of override in memory; expiry on the `Clock`. `peek`: the slots of the override in force at `now`, read at once. */
const memoryOverrides = <A extends { readonly expiresAt?: Date | undefined; readonly slots: number }>(
  kind: Kind<A>
): Overrides<A> & { readonly peek: (name: string, now: number) => number | undefined } => {
  const rows = new Map<string, A>()
  /** Drops the expired rows (lazy purge) and returns the time it read. */
  const purge = Effect.map(Clock.currentTimeMillis, (now) => {
    for (const [name, row] of rows) if (!isLive(row, now)) rows.delete(name)
    return now
  })
  return {
    peek: (name, now) => {
      const row = rows.get(name)
      return row !== undefined && isLive(row, now) ? row.slots : undefined
    },
    addOrUpdate: (name, slots, expiry) =>
      Result.match(kind.check(name, slots, expiry), {
        onFailure: Effect.fail,
        onSuccess: (exp) =>
          Effect.map(purge, (now) => {
            rows.set(name, kind.make(name, slots, new Date(now), exp._tag === "At" ? exp.at : exp._tag === "In" ? new Date(now + exp.millis) : undefined))
          })
      }),
    // an expired row is deleted too, but was no override in force: false, as if purged already
    remove: (name) =>
      hasNul(name)
        ? Effect.succeed(false)
        : Effect.map(Clock.currentTimeMillis, (now) => {
            const row = rows.get(name)
            rows.delete(name)
            return row !== undefined && isLive(row, now)
          }),
    // code-unit order, like PostgreSQL's COLLATE "C" for the names people use
    list: Effect.map(purge, () => [...rows.values()].sort((a, b) => (kind.nameOf(a) < kind.nameOf(b) ? -1 : 1))),
    get: (name) =>
      hasNul(name)
        ? Effect.succeed(Option.none())
        : Effect.map(Clock.currentTimeMillis, (now) => Option.filter(Option.fromNullishOr(rows.get(name)), (row) => isLive(row, now)))
  }
}

/**
 * In-memory overrides; expiry is measured on the `Clock` (so `TestClock` drives it). Built over a job store
 * that asks for them (the in-memory store's claim, see `JobStoreService.admissionOverrides`), it hands the
 * store a reader of them, so that the claim's admission counts a key's or group's slots as the gate does.
 */
export const layerMemory: Layer.Layer<ConcurrencyLimitManager> = Layer.effect(
  ConcurrencyLimitManager,
  Effect.gen(function* () {
    const k = memoryOverrides(keys)
    const g = memoryOverrides(groups)
    const store = yield* Effect.serviceOption(JobStore)
    if (Option.isSome(store)) store.value.admissionOverrides?.({ key: k.peek, group: g.peek })
    return serviceOf(k, g)
  })
)

/** The SQL condition "this row's override still applies". */
const live = "(expires_at IS NULL OR expires_at > now())"

/** One kind of override in its PostgreSQL table. */
const pgOverrides = <A>(sql: SqlClient.SqlClient, kind: Kind<A>): Overrides<A> => {
  const fail = (operation: string) => (cause: unknown) => new LimitStoreError({ operation, cause })
  const table = sql.literal(kind.table)
  const column = sql.literal(kind.column)
  const toRow = (r: any) =>
    kind.make(r.name, Number(r.slots), new Date(r.updated_at), r.expires_at === null || r.expires_at === undefined ? undefined : new Date(r.expires_at))
  const expiresAtOf = (exp: ExpiryOf) =>
    exp._tag === "At"
      ? sql`${exp.at.toISOString()}::timestamptz`
      : exp._tag === "In"
        ? sql`now() + ${exp.millis} * interval '1 millisecond'`
        : sql`NULL::timestamptz`
  return {
    addOrUpdate: (name, slots, expiry) =>
      Result.match(kind.check(name, slots, expiry), {
        onFailure: Effect.fail,
        onSuccess: (exp) =>
          sql`INSERT INTO ${table} (${column}, slots, expires_at)
              VALUES (${name}, ${slots}, ${expiresAtOf(exp)})
              ON CONFLICT (${column}) DO UPDATE SET slots = EXCLUDED.slots, expires_at = EXCLUDED.expires_at, updated_at = now()`.pipe(
            Effect.asVoid,
            Effect.mapError(fail(kind.ops.addOrUpdate))
          )
      }),
    remove: (name) =>
      hasNul(name)
        ? Effect.succeed(false)
        : sql`DELETE FROM ${table} WHERE ${column} = ${name} RETURNING ${sql.literal(live)} AS live`.pipe(
            Effect.map((rows) => rows.length > 0 && (rows[0] as any).live === true),
            Effect.mapError(fail(kind.ops.remove))
          ),
    list: sql`
      WITH purged AS (DELETE FROM ${table} WHERE NOT ${sql.literal(live)})
      SELECT ${column} AS name, slots, updated_at, expires_at FROM ${table} WHERE ${sql.literal(live)} ORDER BY ${column} COLLATE "C"`.pipe(
      Effect.map((rows) => rows.map(toRow)),
      Effect.mapError(fail(kind.ops.list))
    ),
    get: (name) =>
      hasNul(name)
        ? Effect.succeed(Option.none())
        : sql`SELECT ${column} AS name, slots, updated_at, expires_at FROM ${table} WHERE ${column} = ${name} AND ${sql.literal(live)}`.pipe(
            Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toRow)),
            Effect.mapError(fail(kind.ops.get))
          )
  }
}

/** Builds the PostgreSQL overrides service (tables `warp_concurrency_limits`, `warp_concurrency_group_limits`). */
export const makePg = Effect.map(SqlClient.SqlClient, (sql) => serviceOf(pgOverrides(sql, keys), pgOverrides(sql, groups), true))

/** PostgreSQL overrides; runs the concurrency addon's migration when built. */
export const layerPg: Layer.Layer<ConcurrencyLimitManager, LimitStoreError, SqlClient.SqlClient> = Layer.effect(
  ConcurrencyLimitManager,
  Migrations.concurrency.pipe(Effect.mapError((cause) => new LimitStoreError({ operation: "migrate", cause })), Effect.andThen(makePg))
)

/** PostgreSQL overrides without running the migration (when the app migrates on its own). */
export const layerPgWithoutMigrations: Layer.Layer<ConcurrencyLimitManager, never, SqlClient.SqlClient> = Layer.effect(ConcurrencyLimitManager, makePg)
