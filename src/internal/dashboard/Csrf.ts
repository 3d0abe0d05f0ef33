/**
 * CSRF protection of the dashboard's forms: a signed double-submit token.
 *
 * The browser holds a random nonce in an `HttpOnly`, `SameSite=Strict` cookie; every form carries
 * `issuedAt.HMAC-SHA256(secret, nonce.issuedAt)` in a hidden field. A POST is accepted only if the
 * field's signature matches the cookie's nonce under this process's secret and is not older than
 * `maxAge`. Another site can neither read the token nor set the cookie, and a token taken from one
 * browser is worthless with another browser's cookie.
 *
 * @since 0.1.0
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto"

/** The cookie holding the nonce. */
export const cookieName = "warp_csrf"

/** The cookie holding a signed flash message, set by a write's redirect and cleared when shown. */
export const flashCookieName = "warp_flash"

/** The hidden form field holding the token. */
export const fieldName = "_csrf"

/** Signs and checks tokens under one secret. */
export interface Csrf {
  /** A fresh random nonce for the cookie. */
  readonly nonce: () => string
  /** A token for forms rendered for `nonce`. */
  readonly token: (nonce: string) => string
  /** Whether `token` was issued for `nonce` by this secret and has not expired. */
  readonly verify: (nonce: string | undefined, token: string | undefined) => boolean
  /** `text` signed for `nonce` (a flash message): `base64url(text).signature`. */
  readonly seal: (nonce: string, text: string) => string
  /** The text of a value {@link Csrf.seal} made for `nonce` under this secret, if it is one. */
  readonly open: (nonce: string | undefined, sealed: string | undefined) => string | undefined
}

/** Options of {@link make}. */
export interface CsrfOptions {
  /** The signing secret (default: 32 random bytes, fixed for the life of the process). */
  readonly secret?: string | Uint8Array | undefined
  /** How long a token stays valid, in milliseconds (default 12 hours). */
  readonly maxAgeMs?: number | undefined
  /** The clock (tests). */
  readonly now?: (() => number) | undefined
}

/** This process's secret: random, generated once per process, never persisted. */
const processSecret = randomBytes(32)

const sign = (secret: string | Uint8Array, nonce: string, issuedAt: string): Buffer =>
  createHmac("sha256", secret).update(`${nonce}.${issuedAt}`).digest()

/** Builds a signer/checker. */
export const make = (options: CsrfOptions = {}): Csrf => {
  const secret = options.secret ?? processSecret
  const maxAge = options.maxAgeMs ?? 12 * 60 * 60 * 1000
  const now = options.now ?? Date.now
  return {
    nonce: () => randomBytes(18).toString("base64url"),
    token: (nonce) => {
      const issuedAt = String(now())
      return `${issuedAt}.${sign(secret, nonce, issuedAt).toString("base64url")}`
    },
    verify: (nonce, token) => {
      if (nonce === undefined || nonce === "" || token === undefined) return false
      const dot = token.indexOf(".")
      if (dot <= 0) return false
      const issuedAt = token.slice(0, dot)
      if (!/^\d{1,15}$/.test(issuedAt)) return false
      const age = now() - Number(issuedAt)
      if (age < -60_000 || age > maxAge) return false // a minute of clock skew between replicas
      const given = Buffer.from(token.slice(dot + 1), "base64url")
      const expected = sign(secret, nonce, issuedAt)
      return given.length === expected.length && timingSafeEqual(given, expected)
    },
    seal: (nonce, text) => {
      const body = Buffer.from(text, "utf8").toString("base64url")
      return `${body}.${sign(secret, `flash:${nonce}`, body).toString("base64url")}`
    },
    open: (nonce, sealed) => {
      if (nonce === undefined || nonce === "" || sealed === undefined) return undefined
      const dot = sealed.indexOf(".")
      if (dot <= 0) return undefined
      const body = sealed.slice(0, dot)
      const given = Buffer.from(sealed.slice(dot + 1), "base64url")
      const expected = sign(secret, `flash:${nonce}`, body)
      return given.length === expected.length && timingSafeEqual(given, expected) ? Buffer.from(body, "base64url").toString("utf8") : undefined
    }
  }
}
