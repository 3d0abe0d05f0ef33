/**
 * A TCP proxy (node:net) between the workers and a PostgreSQL server, for fault tests:
 *
 * - `cut()` closes every open connection (both sides), as a network failure or a server crash would;
 * - `stall()` stops forwarding on every open connection without closing it (a half-open path: the
 *   client's socket stays open, nothing more arrives); connections opened later work normally;
 * - `retarget(port)` sends new connections to another port (a failover), open ones stay where they are;
 * - `holdAnswers()` keeps what the server sends in the proxy (the client's requests still go through,
 *   counted by `sentWhileHeld`) until `releaseAnswers()`: a request whose answer is on its way.
 */
import { createServer, type Server, type Socket, connect } from "node:net"

/** A running proxy. */
export interface TcpProxy {
  readonly port: number
  /** Where new connections go. */
  readonly target: () => number
  /** Closes every open connection. */
  readonly cut: () => void
  /** Stalls every open connection (no bytes forwarded either way, sockets left open). */
  readonly stall: () => void
  /** New connections go to `port`. */
  readonly retarget: (port: number) => void
  /** Open connections (not counting stalled ones). */
  readonly open: () => number
  /** Connections stalled and still open. */
  readonly stalled: () => number
  /** Keeps the server's bytes in the proxy on every open connection until `releaseAnswers`. */
  readonly holdAnswers: () => void
  /** Forwards what was held, and whatever comes next. */
  readonly releaseAnswers: () => void
  /** Bytes the clients sent since `holdAnswers`. */
  readonly sentWhileHeld: () => number
  /** Closes the proxy and every connection. */
  readonly close: () => Promise<void>
}

interface Pair {
  readonly client: Socket
  readonly upstream: Socket
  stalled: boolean
}

/** Starts a proxy on a free port of 127.0.0.1 forwarding to `127.0.0.1:targetPort`. */
export const startProxy = (targetPort: number): Promise<TcpProxy> => {
  let target = targetPort
  const pairs = new Set<Pair>()
  let held: Array<Pair> = []
  let sentWhileHeld = 0
  const countSent = (d: Buffer) => void (sentWhileHeld += d.length)
  const server: Server = createServer({ pauseOnConnect: true }, (client) => {
    const upstream = connect({ host: "127.0.0.1", port: target })
    const pair: Pair = { client, upstream, stalled: false }
    pairs.add(pair)
    const end = () => {
      pairs.delete(pair)
      client.destroy()
      upstream.destroy()
    }
    client.on("error", end)
    upstream.on("error", end)
    client.on("close", () => {
      if (!pair.stalled) end()
    })
    upstream.on("close", () => {
      if (!pair.stalled) end()
    })
    upstream.on("connect", () => {
      client.pipe(upstream)
      upstream.pipe(client)
      client.resume()
    })
  })
  const stall = (pair: Pair) => {
    pair.stalled = true
    pair.client.unpipe(pair.upstream)
    pair.upstream.unpipe(pair.client)
    pair.client.pause()
    pair.upstream.pause()
    // the server side may go away; the client must not notice
    pair.upstream.removeAllListeners("close")
    pair.upstream.removeAllListeners("error")
    pair.upstream.on("error", () => {})
  }
  return new Promise((resolve, reject) => {
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      resolve({
        port,
        target: () => target,
        cut: () => {
          for (const p of [...pairs]) {
            pairs.delete(p)
            p.client.destroy()
            p.upstream.destroy()
          }
        },
        stall: () => {
          for (const p of pairs) if (!p.stalled) stall(p)
        },
        retarget: (p) => {
          target = p
        },
        holdAnswers: () => {
          sentWhileHeld = 0
          held = [...pairs].filter((p) => !p.stalled)
          for (const p of held) {
            p.upstream.unpipe(p.client)
            p.upstream.pause()
            p.client.on("data", countSent)
          }
        },
        releaseAnswers: () => {
          for (const p of held) {
            p.client.off("data", countSent)
            p.upstream.pipe(p.client)
            p.upstream.resume()
          }
          held = []
        },
        sentWhileHeld: () => sentWhileHeld,
        open: () => [...pairs].filter((p) => !p.stalled && !p.client.destroyed).length,
        stalled: () => [...pairs].filter((p) => p.stalled && !p.client.destroyed).length,
        close: () =>
          new Promise<void>((done) => {
            for (const p of pairs) {
              p.client.destroy()
              p.upstream.destroy()
            }
            pairs.clear()
            server.close(() => done())
          })
      })
    })
  })
}
