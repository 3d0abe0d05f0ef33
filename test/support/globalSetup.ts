import type { TestProject } from "vitest/node"
import { EmbeddedPostgres } from "warp-effect/testing"

declare module "vitest" {
  export interface ProvidedContext {
    databaseUrl: string
  }
}

/** DATABASE_URL when set, else a fresh embedded PostgreSQL for the whole run. */
export default async function setup(project: TestProject) {
  const given = process.env.DATABASE_URL
  if (given !== undefined && given !== "") {
    project.provide("databaseUrl", given)
    return
  }
  const t0 = Date.now()
  const server = await EmbeddedPostgres.start()
  console.log(`embedded PostgreSQL on port ${server.port} in ${Date.now() - t0} ms`)
  project.provide("databaseUrl", server.url)
  return async () => server.stop()
}
