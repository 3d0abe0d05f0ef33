import { Redis } from "ioredis"
import { afterAll } from "vitest"

/** The Redis server for these tests (REDIS_URL, else the local default). */
export const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"

/** True when a Redis server answers PING at {@link redisUrl} within a second. */
export const redisReachable = async (): Promise<boolean> => {
  const probe = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1000 })
  probe.on("error", () => {})
  try {
    await probe.connect()
    return (await probe.ping()) === "PONG"
  } catch {
    return false
  } finally {
    probe.disconnect()
  }
}

/**
 * A key prefix unique to this test run (parallel runs on one server do not collide); every key
 * under it is deleted after the file. `next()` gives a sub-prefix per test.
 */
export const runPrefix = () => {
  const root = `warp:test:${Date.now().toString(36)}:${Math.random().toString(36).slice(2, 8)}:`
  let n = 0
  afterAll(async () => {
    const admin = new Redis(redisUrl, { maxRetriesPerRequest: 1 })
    admin.on("error", () => {})
    try {
      let cursor = "0"
      do {
        const [next, keys] = await admin.scan(cursor, "MATCH", `${root}*`, "COUNT", 1000)
        cursor = next
        if (keys.length > 0) await admin.del(...keys)
      } while (cursor !== "0")
    } finally {
      admin.disconnect()
    }
  })
  return { root, next: () => `${root}${n++}:` }
}
