/**
 * @since 0.1.0
 */
import * as Data from "effect/Data"

/** The job store could not be read or written (connection lost, constraint, ...). */
export class StoreError extends Data.TaggedError("StoreError")<{
  readonly operation: string
  readonly cause: unknown
}> {
  override get message(): string {
    return `JobStore.${this.operation} failed: ${String((this.cause as any)?.message ?? this.cause)}`
  }
}

/**
 * Whether a store failure looks like the database being out of reach (a connection refused, reset or
 * terminated, a server shutting down or starting) rather than a statement the server rejected. Walks the
 * error's `cause` chain for a SQLSTATE of class 08 (connection exception), 57P (operator intervention)
 * or 53 (insufficient resources), an @effect/sql `ConnectionError`, a socket error code, the driver's
 * "connection terminated", or a query that got no answer within the driver's `query_timeout` ("Query read timeout").
 */
export const isOutage = (e: unknown): boolean => {
  let current: unknown = e
  for (let depth = 0; depth < 8 && current !== undefined && current !== null; depth++) {
    // @effect/sql's SqlError whose reason is a lost or refused connection (its message and cause chain say
    // nothing the patterns below know)
    if ((current as { _tag?: unknown })._tag === "ConnectionError") return true
    const code = (current as { code?: unknown }).code
    if (typeof code === "string" && /^(08|57P|53)|^E(CONNREFUSED|CONNRESET|PIPE|TIMEDOUT|HOSTUNREACH|NETUNREACH|AI_AGAIN)$|^ENOTFOUND$/.test(code)) return true
    const message = (current as { message?: unknown }).message
    if (typeof message === "string" && /connection terminated|connection timeout|Connection ended|timeout exceeded when trying to connect|server closed the connection|Query read timeout/i.test(message)) return true
    current = (current as { cause?: unknown }).cause
  }
  return false
}
