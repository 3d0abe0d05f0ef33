/**
 * Statements a process sends to PostgreSQL, counted on the wire (profile-keyless.ts).
 *
 * Effect 4's `@effect/sql-pg` speaks the PostgreSQL protocol itself (no `pg` package whose
 * `Client.query` could be wrapped, as this bench did on Effect 3), so the statements are read from
 * the connections' bytes: `PgClient.layer({ ..., stream: wire.stream(url) })` opens each connection
 * as the client would (TCP, no delay) and this module reads what passes, without changing it.
 *
 * A statement is one `Execute` (extended protocol: the text comes from the `Parse` of the statement
 * it binds, named statements parsed once per connection and run by name afterwards) or one simple
 * `Query` (BEGIN and COMMIT among them); it is timed from the write that carries it to its
 * `CommandComplete` (or error), so a statement pipelined behind another includes its wait, as a
 * client's queued query did with `pg`. Rows are the `DataRow`s it returned. Statements are counted
 * only while `counting` is on; the connection's state (statement names) is followed all the time.
 */
import * as Net from "node:net"
import type { Duplex } from "node:stream"

export interface WireStat {
  /** Statements of this class. */
  n: number
  /** Rows they returned (DataRows). */
  rows: number
  /** Sum of their times, ms (write to answer). */
  ms: number
  /** Those that returned no row. */
  empty: number
  /** Those that failed (ErrorResponse). */
  errors: number
}

interface Pending {
  readonly key: string
  readonly t0: number
  readonly group: number
  rows: number
}

const cstring = (b: Buffer, at: number): [string, number] => {
  const end = b.indexOf(0, at)
  return [b.toString("utf8", at, end), end + 1]
}

/** Reads a byte stream of typed messages (`type`, int32 length, payload), across chunk boundaries. */
const framer = (onMessage: (type: number, payload: Buffer) => void) => {
  let buf: Buffer = Buffer.alloc(0)
  return (chunk: Buffer) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk])
    let at = 0
    while (buf.length - at >= 5) {
      const len = buf.readInt32BE(at + 1)
      if (buf.length - at < 1 + len) break
      onMessage(buf[at]!, buf.subarray(at + 5, at + 1 + len))
      at += 1 + len
    }
    buf = at === buf.length ? Buffer.alloc(0) : Buffer.from(buf.subarray(at))
  }
}

const toBuffer = (chunk: unknown): Buffer | undefined =>
  Buffer.isBuffer(chunk)
    ? chunk
    : chunk instanceof Uint8Array
    ? Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
    : typeof chunk === "string"
    ? Buffer.from(chunk)
    : undefined

export class WireStats {
  readonly stats = new Map<string, WireStat>()
  counting = false
  constructor(private readonly classOf: (text: string) => string) {}

  private record(p: Pending, error: boolean) {
    if (!this.counting) return
    const s = this.stats.get(p.key) ?? { n: 0, rows: 0, ms: 0, empty: 0, errors: 0 }
    this.stats.set(p.key, s)
    s.n++
    s.rows += p.rows
    s.ms += performance.now() - p.t0
    if (p.rows === 0) s.empty++
    if (error) s.errors++
  }

  /** A `stream` option for `PgClient.layer` that connects to `url`'s host and port and reads the traffic. */
  stream(url: string): () => Duplex {
    const u = new URL(url)
    const host = u.hostname === "" ? "127.0.0.1" : u.hostname
    const port = u.port === "" ? 5432 : Number(u.port)
    return () => this.tap(Net.connect({ host, port, noDelay: true }))
  }

  private tap(socket: Net.Socket): Net.Socket {
    // the client's part is read once the server said it is ready the first time (after the startup
    // exchange, whose first message has no type byte)
    let ready = false
    const statements = new Map<string, string>()
    const portals = new Map<string, string>()
    const pending: Array<Pending> = []
    // a group is what one Sync (or one simple Query) closes; the server answers it with ReadyForQuery,
    // and what a failed group's statements were skipped for is dropped then
    let sent = 0
    let answered = 0
    const classify = (text: string | undefined) => (text === undefined ? "(unknown statement)" : this.classOf(text))
    const client = framer((type, p) => {
      switch (type) {
        case 0x50: {
          // Parse: name, text
          const [name, next] = cstring(p, 0)
          statements.set(name, cstring(p, next)[0])
          break
        }
        case 0x42: {
          // Bind: portal, statement
          const [portal, next] = cstring(p, 0)
          const text = statements.get(cstring(p, next)[0])
          if (text !== undefined) portals.set(portal, text)
          break
        }
        case 0x45: // Execute: portal
          pending.push({ key: classify(portals.get(cstring(p, 0)[0])), t0: performance.now(), group: sent, rows: 0 })
          break
        case 0x51: // Query: text
          pending.push({ key: classify(cstring(p, 0)[0]), t0: performance.now(), group: sent, rows: 0 })
          sent++
          break
        case 0x53: // Sync
          sent++
          break
        case 0x43: {
          // Close: 'S' statement or 'P' portal, name
          const [name] = cstring(p, 1)
          if (p[0] === 0x53) statements.delete(name)
          else portals.delete(name)
          break
        }
      }
    })
    const server = framer((type) => {
      if (!ready) {
        if (type === 0x5a) ready = true
        return
      }
      const head = pending[0]
      const current = head !== undefined && head.group === answered ? head : undefined
      switch (type) {
        case 0x44: // DataRow
          if (current !== undefined) current.rows++
          break
        case 0x43: // CommandComplete
        case 0x49: // EmptyQueryResponse
        case 0x73: // PortalSuspended
          if (current !== undefined) this.record(pending.shift()!, false)
          break
        case 0x45: // ErrorResponse
          if (current !== undefined) this.record(pending.shift()!, true)
          break
        case 0x5a: // ReadyForQuery
          while (pending.length > 0 && pending[0]!.group <= answered) pending.shift()
          answered++
          break
      }
    })
    socket.on("data", (chunk: Buffer) => server(chunk))
    const write = socket.write
    socket.write = function (this: Net.Socket, chunk: unknown, ...rest: Array<any>) {
      if (ready) {
        const b = toBuffer(chunk)
        if (b !== undefined) client(b)
      }
      return (write as (...args: Array<unknown>) => boolean).call(this, chunk, ...rest)
    } as typeof socket.write
    return socket
  }
}
