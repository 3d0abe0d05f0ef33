/**
 * The Redis semaphore provider: leased slots in one hash per name (ioredis).
 *
 * - Slot-pool rule: the slots of `name` at limit N are the fields `0` .. `N-1` of the hash
 *   `{prefix}{name}` for every N, so `Mutex(k)` and `Semaphore(k, N)` share one pool of N slots.
 * - A field holds `{owner token}|{lease expiry in ms, Redis clock}`. One Lua script per
 *   acquisition scans the slots from a random offset and takes the first one that is absent or
 *   expired: the script runs atomically, so a scan sees one consistent state and "full" means
 *   every slot was held. Release deletes the field only if it still carries the holder's token.
 * - While a slot is held, a heartbeat extends its lease every `heartbeat`; a holder that stops
 *   (its process died) loses the slot when the lease expires. `slot.lost` completes when the
 *   heartbeat finds the lease gone or taken over, or could not renew it for a whole lease.
 *
 * @since 0.1.0
 */
import { randomUUID } from "node:crypto"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import {
  acquireWith,
  type Held,
  randomOffset,
  SemaphoreError,
  SemaphoreProvider,
  type SemaphoreProviderService,
  validateLimit
} from "./SemaphoreProvider.js"
import { importPeer, type MissingPeerDependency } from "../MissingPeer.js"

/** Options of the Redis provider. */
export interface RedisProviderOptions {
  /** Prefix of the hash keys (default `"warp:semaphore:"`). */
  readonly prefix?: string
  /** How long a slot stays held without a heartbeat (default 10 seconds). */
  readonly lease?: Duration.DurationInput
  /** How often a held slot's lease is extended (default a third of the lease). */
  readonly heartbeat?: Duration.DurationInput
  /** How often a waiting `tryAcquire` retries (default 10 ms). */
  readonly retryInterval?: Duration.DurationInput
}

/** Options of {@link layer}: the provider options and the connection. */
export interface RedisLayerOptions extends RedisProviderOptions {
  /** A `redis://` URL or ioredis options (default `redis://127.0.0.1:6379`). */
  readonly redis?: string | RedisConnectionOptions
}

/**
 * Connection options handed to ioredis as they are (`host`, `port`, `password`, `db`, `tls`, …). Typed
 * loosely so that this module's types do not need the optional `ioredis` peer installed.
 */
export interface RedisConnectionOptions {
  readonly host?: string
  readonly port?: number
  readonly [option: string]: unknown
}

/**
 * What the provider needs of a Redis client: an ioredis `Redis` (or `Cluster`) instance fits. Its
 * commands defined by {@link make} are called through it.
 */
export interface RedisClient {
  defineCommand(name: string, definition: { numberOfKeys?: number; lua: string }): void
}


const now = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`

/** Milliseconds since the epoch at which a field's lease expires. */
const expiry = `local function expiry(v)
  local sep = string.find(v, '|', 1, true)
  if not sep then return 0 end
  return tonumber(string.sub(v, sep + 1)) or 0
end`

/** Keeps the hash alive at least as long as its newest lease. */
const keepAlive = `local ttl = redis.call('PTTL', KEYS[1])
if ttl < lease then redis.call('PEXPIRE', KEYS[1], lease) end`

/** KEYS[1] hash; ARGV limit, offset, token, lease ms. Returns the slot taken or -1. */
const ACQUIRE = `${now}
${expiry}
local limit = tonumber(ARGV[1])
local offset = tonumber(ARGV[2])
local lease = tonumber(ARGV[4])
local held = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do held[all[i]] = all[i + 1] end
for i = 0, limit - 1 do
  local slot = (offset + i) % limit
  local v = held[tostring(slot)]
  if not v or expiry(v) <= now then
    redis.call('HSET', KEYS[1], slot, ARGV[3] .. '|' .. string.format('%d', now + lease))
    ${keepAlive}
    return slot
  end
end
return -1`

/** KEYS[1] hash; ARGV slot, token. Deletes the field if the token still owns it. */
const RELEASE = `local v = redis.call('HGET', KEYS[1], ARGV[1])
if v and string.sub(v, 1, #ARGV[2] + 1) == ARGV[2] .. '|' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 1
end
return 0`

/** KEYS[1] hash; ARGV slot, token, lease ms. Extends the lease if the token still owns it unexpired. */
const RENEW = `${now}
${expiry}
local lease = tonumber(ARGV[3])
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v and string.sub(v, 1, #ARGV[2] + 1) == ARGV[2] .. '|' and expiry(v) > now then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. '|' .. string.format('%d', now + lease))
  ${keepAlive}
  return 1
end
return 0`

interface Scripts {
  warpSemaphoreAcquire(key: string, limit: number, offset: number, token: string, leaseMs: number): Promise<number>
  warpSemaphoreRelease(key: string, slot: number, token: string): Promise<number>
  warpSemaphoreRenew(key: string, slot: number, token: string, leaseMs: number): Promise<number>
}

/**
 * Builds the provider on an ioredis client (left open: the caller owns it). Heartbeats run in
 * the surrounding scope.
 */
export const make = (client: RedisClient, options: RedisProviderOptions = {}): Effect.Effect<SemaphoreProviderService, never, Scope.Scope> =>
  Effect.gen(function* () {
    const scope = yield* Effect.scope
    const prefix = options.prefix ?? "warp:semaphore:"
    const lease = Duration.decode(options.lease ?? "10 seconds")
    const leaseMs = Math.max(1, Math.round(Duration.toMillis(lease)))
    const heartbeat = options.heartbeat === undefined ? Duration.millis(leaseMs / 3) : Duration.decode(options.heartbeat)
    const every = options.retryInterval ?? "10 millis"
    client.defineCommand("warpSemaphoreAcquire", { numberOfKeys: 1, lua: ACQUIRE })
    client.defineCommand("warpSemaphoreRelease", { numberOfKeys: 1, lua: RELEASE })
    client.defineCommand("warpSemaphoreRenew", { numberOfKeys: 1, lua: RENEW })
    const scripts = client as unknown as Scripts
    const call = <A>(name: string, message: string, f: () => Promise<A>) =>
      Effect.tryPromise({ try: f, catch: (cause) => new SemaphoreError({ name, message, cause }) })

    /** Renews the lease every `heartbeat`; completes `lost` when it is gone or could not be renewed for a lease. */
    const keepLease = (key: string, name: string, slot: number, token: string, lost: Deferred.Deferred<void>) => {
      let renewed = Date.now()
      const renew = call(name, "lease renewal failed", () => scripts.warpSemaphoreRenew(key, slot, token, leaseMs)).pipe(
        Effect.flatMap((ok) => (ok === 1 ? Effect.sync(() => void (renewed = Date.now())) : Effect.fail("gone" as const))),
        Effect.catchTag("SemaphoreError", () => (Date.now() - renewed >= leaseMs ? Effect.fail("expired" as const) : Effect.void))
      )
      return renew.pipe(
        Effect.repeat(Schedule.spaced(heartbeat)),
        Effect.catchAll(() => Deferred.succeed(lost, undefined)),
        Effect.asVoid,
        Effect.delay(heartbeat),
        // forked from an uninterruptible acquisition: the heartbeat itself must be interruptible
        Effect.interruptible,
        Effect.forkIn(scope)
      )
    }

    const attempt = (name: string, limit: number): Effect.Effect<Option.Option<Held>, SemaphoreError> =>
      Effect.gen(function* () {
        const key = prefix + name
        const token = randomUUID()
        const slot = yield* call(name, "acquire script failed", () => scripts.warpSemaphoreAcquire(key, limit, randomOffset(limit), token, leaseMs))
        if (slot < 0) return Option.none()
        const lost = yield* Deferred.make<void>()
        const fiber = yield* keepLease(key, name, slot, token, lost)
        const release = Fiber.interrupt(fiber).pipe(
          Effect.zipRight(call(name, "release script failed", () => scripts.warpSemaphoreRelease(key, slot, token))),
          Effect.ignore
        )
        return Option.some({ slot: { name, index: slot, lost: Deferred.await(lost) }, release })
      })

    const service: SemaphoreProviderService = {
      tryAcquire: (name, limit, timeout) =>
        Effect.zipRight(validateLimit(name, limit), acquireWith(Effect.suspend(() => attempt(name, limit)), timeout, every))
    }
    return service
  })

/** A Redis provider Layer owning its own ioredis client (connected when built, closed with the Layer). */
export const layer = (options: RedisLayerOptions = {}): Layer.Layer<SemaphoreProvider, SemaphoreError | MissingPeerDependency> =>
  Layer.scoped(
    SemaphoreProvider,
    Effect.gen(function* () {
      const { Redis } = yield* importPeer("ioredis", "warp-effect/redis", () => import("ioredis"))
      const client = yield* Effect.acquireRelease(
        Effect.sync(() => {
          const defaults = { lazyConnect: true, maxRetriesPerRequest: 2 }
          return typeof options.redis === "string"
            ? new Redis(options.redis, defaults)
            : new Redis({ host: "127.0.0.1", port: 6379, ...defaults, ...(options.redis as object) })
        }),
        (client) => Effect.promise(() => client.quit().catch(() => client.disconnect()))
      )
      yield* Effect.tryPromise({
        try: () => client.connect(),
        catch: (cause) => new SemaphoreError({ name: "*", message: "could not connect to Redis", cause })
      })
      return yield* make(client, options)
    })
  )
