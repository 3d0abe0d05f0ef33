/** Starts a throwaway embedded PostgreSQL, prints its URL, and stops it on SIGTERM/SIGINT (for scripts). */
import * as EmbeddedPostgres from "../src/internal/testing/EmbeddedPostgres.js"

const server = await EmbeddedPostgres.start()
console.log(server.url)
const stop = () => void server.stop().finally(() => process.exit(0))
process.on("SIGTERM", stop)
process.on("SIGINT", stop)
setInterval(() => {}, 1 << 30)
