/**
 * The web dashboard: jobs by state, one job's payload, audit trail and stamped policy, the
 * requeued-vs-succeeded counters, and — when the concurrency addon is registered — the admin
 * concurrency limits with inline edit, delete and create.
 *
 * It is a set of `effect/http` `HttpRouter` routes: merge {@link router} into the layers of an existing
 * Effect HTTP app, or serve it on its own port with {@link layer}. Reads need a `JobStore`; the
 * concurrency page looks the `ConcurrencyLimitManager` up per request (`Effect.serviceOption`) and
 * answers 404 without it.
 *
 * Operators the `authorize` hook allows can retry, delete and requeue jobs, one from its page or every
 * job a filter matches (after a confirmation with the count); the jobs list filters by id, key prefix,
 * type, state and creation window, all carried in the URL.
 *
 * Writes are denied unless the app's `authorize` hook allows the request; forms carry a CSRF token
 * (HMAC of a per-browser cookie nonce under a per-process secret); every value on a page is
 * HTML-escaped.
 *
 * @since 0.1.0
 */
import * as ByteSize from "effect/ByteSize"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as HttpIncomingMessage from "effect/http/HttpIncomingMessage"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServer from "effect/http/HttpServer"
import type { ServeError } from "effect/http/HttpServerError"
import * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import * as UrlParams from "effect/http/UrlParams"
import * as Layer from "effect/Layer"
import * as NetAddress from "effect/net/NetAddress"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import { createHash } from "node:crypto"
import { createServer } from "node:http"
import { ConcurrencyLimitManager, type ConcurrencyLimitManagerService } from "../concurrency/ConcurrencyLimitManager.js"
import { JobExpired } from "../job/Retention.js"
import * as JobMetadata from "../policy/JobMetadata.js"
import { isStorableId, JobStore, operatorFrom } from "../store/JobStore.js"
import * as Csrf from "./Csrf.js"
import type { Html } from "./Html.js"
import * as LimitForm from "./LimitForm.js"
import { importPeer, type MissingPeerDependency } from "../MissingPeer.js"
import * as Actions from "./Actions.js"
import * as AuditBanner from "./AuditBanner.js"
import * as Filters from "./Filters.js"
import * as JobsPage from "./JobsPage.js"
import * as Pages from "./Pages.js"
import * as KeysPage from "./KeysPage.js"
import * as Refresh from "./Refresh.js"
import * as WorkersPage from "./WorkersPage.js"

/** Decides whether a request may write: change admin limits, retry, delete or requeue jobs. */
export type Authorize = (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<boolean>

/** Denies every write: the default. The concurrency page says writes are disabled. */
export const readOnly: Authorize = () => Effect.succeed(false)

/** Allows every write. Only for a dashboard nobody else can reach (a local demo, a test). */
export const allowWrites: Authorize = () => Effect.succeed(true)

/** Options of {@link router}. */
export interface DashboardOptions {
  /** The public path of the dashboard, e.g. "/warp" (the default) or "/admin/jobs"; "" serves it at the root. */
  readonly prefix?: string | undefined
  /** Who may write: create, edit and delete admin limits; retry, delete and requeue jobs (default {@link readOnly}). */
  readonly authorize?: Authorize | undefined
  /** Jobs per page on the list (default 25). */
  readonly pageSize?: number | undefined
  /**
   * The CSRF signing secret (default: random per process). Give every replica the same secret when
   * a load balancer may send a form's POST to another process than the one that rendered it.
   */
  readonly csrfSecret?: string | Uint8Array | undefined
}

/** Options of {@link layer}: the router's, plus where to listen. */
export interface ServeOptions extends DashboardOptions {
  /** TCP port (default 0: any free port; read it back with {@link url}). */
  readonly port?: number | undefined
  /** Interface to listen on (default "127.0.0.1": loopback only). */
  readonly host?: string | undefined
}

/** The largest form body accepted (a 512-character key and a token fit many times over). */
const maxFormBytes = 64 * 1024

/** Checks and normalizes a prefix: "" or "/segment[/segment...]" without a trailing slash. */
export const normalizePrefix = (prefix: string): string => {
  const p = prefix.endsWith("/") ? prefix.slice(0, -1) : prefix
  if (p !== "" && !/^(\/[A-Za-z0-9._~-]+)+$/.test(p)) {
    throw new Error(`Dashboard prefix must look like "/warp" or "/admin/jobs", got ${JSON.stringify(prefix)}`)
  }
  return p
}

const styleHash = createHash("sha256").update(Pages.css).digest("base64")

/** Headers of every dashboard page. */
const securityHeaders = {
  "content-security-policy": `default-src 'none'; style-src 'sha256-${styleHash}'; script-src 'sha256-${Refresh.hash}'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "same-origin",
  "cache-control": "no-store"
}

const page = (body: Html, status = 200) =>
  HttpServerResponse.html(body.value).pipe(HttpServerResponse.setStatus(status), HttpServerResponse.setHeaders(securityHeaders))

const seeOther = (location: string) => HttpServerResponse.redirect(location, { status: 303, headers: securityHeaders })

const first = (params: UrlParams.UrlParams, name: string): string | undefined => Option.getOrUndefined(UrlParams.getFirst(params, name))

/**
 * The dashboard's routes, at `options.prefix` (default "/warp"), as a Layer that adds them to the
 * app's `HttpRouter` (merge it into the layers given to `HttpRouter.serve`). Their handlers need a
 * `JobStore` (a request-level requirement: `HttpRouter.serve` turns it into a requirement of the
 * server layer). Links are built from `prefix`, so pass the full public path rather than adding the
 * routes under another prefix.
 */
export const router = (options: DashboardOptions = {}): Layer.Layer<never, never, HttpRouter.HttpRouter | HttpRouter.Request<"Requires", JobStore>> =>
  HttpRouter.addAll(routes(options))

/** The dashboard's routes, at full paths under `options.prefix` (see {@link router}). */
const routes = (options: DashboardOptions) => {
  const prefix = normalizePrefix(options.prefix ?? "/warp")
  const authorize = options.authorize ?? readOnly
  const pageSize = options.pageSize ?? 25
  const csrf = Csrf.make({ secret: options.csrfSecret })
  const cookiePath = prefix === "" ? "/" : prefix

  const frame = Effect.map(Effect.serviceOption(ConcurrencyLimitManager), (m): Pages.Frame & { manager: Option.Option<ConcurrencyLimitManagerService> } => ({
    prefix,
    concurrency: Option.isSome(m),
    manager: m
  }))

  /** Renders, turning store failures into a 500 page (the cause goes to the log, not the page). */
  const guarded = <E extends { readonly _tag: string }, R>(
    handler: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, never, R> =>
    Effect.catch(handler, (e) =>
      Effect.andThen(
        Effect.logError("warp dashboard: request failed", e),
        Effect.map(frame, (f) => page(Pages.message(f, "Something went wrong", `The dashboard could not read its data (${e._tag}). Details are in the server log.`), 500))
      )
    )

  const notFound = (what: string) => Effect.map(frame, (f) => page(Pages.message(f, "Not found", what), 404))

  /** The CSRF nonce of this browser, and a cookie to set when it has none yet. */
  const nonceOf = (request: HttpServerRequest.HttpServerRequest) => {
    const existing = request.cookies[Csrf.cookieName]
    return existing !== undefined && /^[A-Za-z0-9_-]{16,64}$/.test(existing) ? { nonce: existing, fresh: false } : { nonce: csrf.nonce(), fresh: true }
  }
  const withNonceCookie = (response: HttpServerResponse.HttpServerResponse, n: { nonce: string; fresh: boolean }) =>
    n.fresh
      ? HttpServerResponse.setCookieUnsafe(response, Csrf.cookieName, n.nonce, { httpOnly: true, sameSite: "strict", path: cookiePath })
      : response

  /** The flash message of this browser (signed for its nonce), and the response that clears it. */
  const flashOf = (request: HttpServerRequest.HttpServerRequest) => {
    const sealed = request.cookies[Csrf.flashCookieName]
    const text = csrf.open(request.cookies[Csrf.cookieName], sealed)
    const clear = (response: HttpServerResponse.HttpServerResponse) =>
      sealed === undefined
        ? response
        : HttpServerResponse.setCookieUnsafe(response, Csrf.flashCookieName, "", { httpOnly: true, sameSite: "strict", path: cookiePath, maxAge: 0 })
    return { text: text !== undefined && text.length <= 2000 ? text : undefined, clear }
  }

  /** A 303 after a write, carrying a flash message signed for this browser's nonce. */
  const seeOtherWithFlash = (location: string, nonce: string, text: string) =>
    HttpServerResponse.setCookieUnsafe(seeOther(location), Csrf.flashCookieName, csrf.seal(nonce, text), {
      httpOnly: true,
      sameSite: "strict",
      path: cookiePath,
      maxAge: "60 seconds"
    })

  /** Whether `id` could be a stored job's id (a form or path value: not empty, storable, not over-long). */
  const isJobId = (id: string | undefined): id is string => id !== undefined && id !== "" && isStorableId(id) && id.length <= Filters.MAX_FIELD_LENGTH

  const badRequest = (f: Pages.Frame, text: string) => page(Pages.message(f, "Bad request", text), 400)

  /**
   * Reads a POSTed form: size limit, CSRF token for this browser's cookie, then the app's
   * `authorize` hook. Failure: the refusal to answer (nothing is written).
   */
  const readForm = (f: Pages.Frame) =>
    Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      if (Number(request.headers["content-length"] ?? 0) > maxFormBytes) {
        return Result.fail(page(Pages.message(f, "Form too large", "The form is larger than any valid input; nothing was changed."), 413))
      }
      const body = yield* request.urlParamsBody.pipe(Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(maxFormBytes)), Effect.result)
      if (Result.isFailure(body)) return Result.fail(badRequest(f, "The form could not be read."))
      const form = body.success
      if (!csrf.verify(request.cookies[Csrf.cookieName], first(form, Csrf.fieldName))) {
        return Result.fail(
          page(
            Pages.message(f, "Form expired", "The form has expired or did not come from this dashboard, so nothing was changed. Reload the page and try again."),
            403
          )
        )
      }
      if (!(yield* authorize(request))) {
        return Result.fail(page(Pages.message(f, "Writes are disabled", "This dashboard is read-only for this request; nothing was changed."), 403))
      }
      return Result.succeed({ form, request, nonce: request.cookies[Csrf.cookieName]! })
    })

  const jobs = guarded(
    Effect.gen(function* () {
      const f = yield* frame
      const request = yield* HttpServerRequest.HttpServerRequest
      const params = yield* HttpServerRequest.ParsedSearchParams
      const filters = Filters.parse(params)
      if (Result.isFailure(filters)) return badRequest(f, filters.failure)
      const rawPage = params.page
      if (rawPage !== undefined && (typeof rawPage !== "string" || !/^[1-9]\d{0,8}$/.test(rawPage))) {
        return badRequest(f, `The page must be a whole number from 1 (got "${String(rawPage).slice(0, 40)}").`)
      }
      const n = rawPage === undefined ? 1 : Number(rawPage)
      const store = yield* JobStore
      const [list, counts, writable] = yield* Effect.all([
        store.list({ ...Filters.toStore(filters.success), limit: pageSize, offset: (n - 1) * pageSize }),
        store.countByState,
        authorize(request)
      ])
      const flash = flashOf(request)
      return flash.clear(
        page(
          JobsPage.render(f, {
            filters: filters.success,
            page: n,
            pageSize,
            rows: list.rows,
            total: list.total,
            counts,
            now: new Date(),
            writable,
            flash: flash.text
          })
        )
      )
    })
  )

  const job = guarded(
    Effect.gen(function* () {
      const f = yield* frame
      const request = yield* HttpServerRequest.HttpServerRequest
      const { id } = yield* HttpRouter.params
      // an id no row can have (a NUL, an unpaired surrogate, longer than any id) is not found
      if (!isJobId(id)) return yield* notFound("No job with id like this: it cannot be the id of any job.")
      const read = yield* Effect.catchTag((yield* JobStore).get(id), "JobExpired", (e) => Effect.succeed(e))
      // removed by retention: its tombstone says how it ended and when (410 Gone)
      if (read instanceof JobExpired) return page(Pages.expired(f, read, new Date()), 410)
      const detail = read
      if (Option.isNone(detail)) return yield* notFound(`No job with id "${id}".`)
      const meta = JobMetadata.decode(detail.value.job.metadata)
      const key = Result.isSuccess(meta) ? meta.success.policies.concurrency?.value.key : undefined
      const override =
        key !== undefined && Option.isSome(f.manager) ? Option.getOrUndefined(yield* f.manager.value.get(key)) : undefined
      const group = Result.isSuccess(meta) ? meta.success.policies.concurrency?.value.total?.group : undefined
      const groupOverride =
        group !== undefined && Option.isSome(f.manager) ? Option.getOrUndefined(yield* f.manager.value.getGroupLimit(group)) : undefined
      const j = detail.value.job
      // a running job whose key its row does not carry yet (resolved from the handler or contract in its
      // first attempt): its worker reports it
      const reported =
        key === undefined && j.state === "Processing"
          ? (yield* (yield* JobStore).workers)
              .filter((w) => w.workerId === j.lockedBy)
              .flatMap((w) =>
                w.slots.flatMap((s) => (s.jobs ?? []).filter((r) => r.id === j.id).map((r) => ({ key: s.key, limit: r.limit, source: r.source, worker: w })))
              )[0]
          : undefined
      const live =
        key !== undefined && (j.state === "Processing" || j.state === "Enqueued" || j.state === "Scheduled")
          ? KeysPage.lineCard(f, j, yield* (yield* JobStore).insight.line(key, { id: j.id, override: override?.slots ?? null }))
          : reported !== undefined
            ? KeysPage.reportedCard(j, reported, reported.worker.seenAt, yield* (yield* JobStore).insight.line(reported.key, { id: j.id, override: null }))
            : undefined
      const n = nonceOf(request)
      const writable = yield* authorize(request)
      const flash = flashOf(request)
      const actions = writable ? Actions.jobButtons(f, j, csrf.token(n.nonce), Csrf.fieldName) : undefined
      return withNonceCookie(flash.clear(page(Pages.jobPage(f, { detail: detail.value, override, groupOverride, now: new Date(), actions, flash: flash.text, live }))), n)
    })
  )

  /** POST /actions, action=cancel: asks to cancel one job (a running one is interrupted by its worker). */
  const cancelPost = (f: Pages.Frame, form: UrlParams.UrlParams, nonce: string) =>
    Effect.gen(function* () {
      const id = first(form, "id")
      const reason = (first(form, "reason") ?? "").trim()
      if (!isJobId(id)) {
        return yield* notFound("No job with this id; nothing was changed.")
      }
      if (reason.length > Actions.MAX_REASON_LENGTH || !isStorableId(reason)) {
        return badRequest(f, `The reason must be text of at most ${Actions.MAX_REASON_LENGTH} characters; nothing was changed.`)
      }
      const result = yield* (yield* JobStore).requestCancel(id, reason)
      switch (result) {
        case "NotFound":
          return yield* notFound(`No job with id "${id}"; nothing was changed.`)
        case "Finished":
          return page(Pages.message(f, "Not possible in this state", "The job has already ended; nothing was changed."), 409)
        default:
          return seeOtherWithFlash(`${prefix}/jobs/${encodeURIComponent(id)}`, nonce, Actions.cancelSummary(result))
      }
    })

  /** POST /actions: retry, delete, requeue or cancel one job. */
  const actionPost = guarded(
    Effect.gen(function* () {
      const f = yield* frame
      const read = yield* readForm(f)
      if (Result.isFailure(read)) return read.failure
      const { form, nonce } = read.success
      const action = first(form, "action")
      if (action === "cancel") return yield* cancelPost(f, form, nonce)
      const id = first(form, "id")
      if (!Actions.isAction(action)) return badRequest(f, "Unknown action: nothing was changed.")
      if (!isJobId(id)) {
        return yield* notFound("No job with this id; nothing was changed.")
      }
      const store = yield* JobStore
      const detail = yield* Effect.catchTag(store.get(id), "JobExpired", () => Effect.succeed(Option.none()))
      if (Option.isNone(detail)) return yield* notFound(`No job with id "${id}" (or it expired); nothing was changed.`)
      const result = yield* store.operate(action, [id])
      if (result.changed === 0) {
        const state = Option.getOrUndefined(yield* Effect.catchTag(store.get(id), "JobExpired", () => Effect.succeed(Option.none())))?.job.state ?? detail.value.job.state
        return page(
          Pages.message(
            f,
            "Not possible in this state",
            `The job is ${state}; ${Actions.label[action].toLowerCase()} applies to ${operatorFrom[action].join(", ")} jobs. Nothing was changed.`
          ),
          409
        )
      }
      return seeOtherWithFlash(`${prefix}/jobs/${encodeURIComponent(id)}`, nonce, Actions.summary(action, result.changed, result.skipped))
    })
  )

  /** The jobs a bulk action would change: the filter's matches in a state the action applies to. */
  const bulkFilter = (filters: Filters.Filters, action: "retry" | "delete" | "requeue") => ({
    ...Filters.toStore(filters),
    states: operatorFrom[action]
  })

  /** GET /bulk: the confirmation step, with the count; nothing is written. */
  const bulkConfirm = guarded(
    Effect.gen(function* () {
      const f = yield* frame
      const request = yield* HttpServerRequest.HttpServerRequest
      const params = yield* HttpServerRequest.ParsedSearchParams
      if (!(yield* authorize(request))) {
        return page(Pages.message(f, "Writes are disabled", "This dashboard is read-only for this request."), 403)
      }
      const action = params.action
      if (!Actions.isAction(action)) return badRequest(f, "Unknown action.")
      const filters = Filters.parse(params)
      if (Result.isFailure(filters)) return badRequest(f, filters.failure)
      const found = yield* (yield* JobStore).list({ ...bulkFilter(filters.success, action), limit: 0, offset: 0 })
      const n = nonceOf(request)
      return withNonceCookie(
        page(Actions.confirmPage(f, { action, filters: filters.success, eligible: found.total, token: csrf.token(n.nonce), fieldName: Csrf.fieldName })),
        n
      )
    })
  )

  /** POST /bulk: applies the action to at most `maxBulk` matches, newest first, and says what changed. */
  const bulkPost = guarded(
    Effect.gen(function* () {
      const f = yield* frame
      const read = yield* readForm(f)
      if (Result.isFailure(read)) return read.failure
      const { form, nonce } = read.success
      const action = first(form, "action")
      if (!Actions.isAction(action)) return badRequest(f, "Unknown action: nothing was changed.")
      const fields: Record<string, string | ReadonlyArray<string>> = {}
      for (const name of Filters.names) {
        const values = UrlParams.getAll(form, name)
        if (values.length > 0) fields[name] = values.length === 1 ? values[0]! : values
      }
      const filters = Filters.parse(fields)
      if (Result.isFailure(filters)) return badRequest(f, `${filters.failure} Nothing was changed.`)
      const store = yield* JobStore
      const found = yield* store.list({ ...bulkFilter(filters.success, action), limit: Actions.maxBulk, offset: 0 })
      const result = yield* store.operate(
        action,
        found.rows.map((j) => j.id)
      )
      const rest = found.total - found.rows.length
      const text = `${Actions.summary(action, result.changed, result.skipped)}${rest > 0 ? ` ${rest} more match: repeat to continue (at most ${Actions.maxBulk} a time).` : ""}`
      return seeOtherWithFlash(Filters.href(prefix, filters.success), nonce, text)
    })
  )

  const refreshScript = Effect.succeed(
    HttpServerResponse.text(Refresh.script, { contentType: "text/javascript; charset=utf-8" }).pipe(
      HttpServerResponse.setHeaders({ ...securityHeaders, "cache-control": "public, max-age=3600" })
    )
  )

  const counters = guarded(
    Effect.gen(function* () {
      const f = yield* frame
      return page(Pages.countersPage(f, yield* (yield* JobStore).counters))
    })
  )

  /** The slot audit's warning from the findings of its latest run the store keeps (nothing when none). */
  const auditBanner = (f: Pages.Frame) =>
    Effect.flatMap(JobStore, (store) => Effect.map(store.slotAuditFindings, (findings) => AuditBanner.slotAuditBanner(f, findings, new Date())))

  const workers = guarded(
    Effect.gen(function* () {
      const f = yield* frame
      const store = yield* JobStore
      const [list, audit] = yield* Effect.all([store.workers, auditBanner(f)])
      return page(WorkersPage.workersPage(f, list, audit))
    })
  )

  const keys = guarded(
    Effect.gen(function* () {
      const f = yield* frame
      if (Option.isNone(f.manager)) return yield* notFound("The concurrency addon is not registered in this application.")
      const params = yield* HttpServerRequest.ParsedSearchParams
      const rawPage = params.page === undefined ? "1" : params.page
      if (typeof rawPage !== "string" || !/^[1-9]\d{0,8}$/.test(rawPage)) {
        return badRequest(f, "The page must be a whole number from 1; nothing to show for this address.")
      }
      const n = Number(rawPage)
      const overrides = yield* f.manager.value.list
      const now = new Date()
      const [got, audit] = yield* Effect.all([
        (yield* JobStore).insight.liveKeys({ overrides, limit: pageSize, offset: (n - 1) * pageSize }),
        auditBanner(f)
      ])
      return page(KeysPage.keysPage(f, { rows: got.rows, total: got.total, page: n, pageSize, now, audit, rankedAt: got.rankedAt }))
    })
  )

  const concurrencyView = (
    f: Pages.Frame,
    manager: ConcurrencyLimitManagerService,
    request: HttpServerRequest.HttpServerRequest,
    extra: Partial<Pages.ConcurrencyView>,
    status: number
  ) =>
    Effect.gen(function* () {
      const n = nonceOf(request)
      const writable = yield* authorize(request)
      const [limits, groups, audit] = yield* Effect.all([manager.list, manager.listGroupLimits, auditBanner(f)])
      const body = Pages.concurrencyPage(f, {
        limits,
        groups,
        audit,
        token: writable ? csrf.token(n.nonce) : undefined,
        fieldName: Csrf.fieldName,
        ...extra
      })
      return withNonceCookie(page(body, status), n)
    })

  const concurrency = guarded(
    Effect.gen(function* () {
      const f = yield* frame
      if (Option.isNone(f.manager)) return yield* notFound("The concurrency addon is not registered in this application.")
      const request = yield* HttpServerRequest.HttpServerRequest
      // the notice comes only from the signed flash cookie a write's redirect set: a URL cannot forge it
      const flash = flashOf(request)
      const notice = flash.text
      return flash.clear(yield* concurrencyView(f, f.manager.value, request, { notice }, 200))
    })
  )

  const concurrencyPost = guarded(
    Effect.gen(function* () {
      const f = yield* frame
      if (Option.isNone(f.manager)) return yield* notFound("The concurrency addon is not registered in this application.")
      const manager = f.manager.value
      const read = yield* readForm(f)
      if (Result.isFailure(read)) return read.failure
      const { form, nonce, request } = read.success
      const back = `${prefix}/concurrency`
      const act = first(form, "action") ?? ""
      // "save" / "delete" act on a key's override, "save-group" / "delete-group" on a group's total cap
      const field: LimitForm.NameField = act.endsWith("-group") ? "group" : "key"
      const name = first(form, field)
      switch (act) {
        case "save":
        case "save-group": {
          const input = LimitForm.parse(name, first(form, "slots"), field)
          if (Result.isFailure(input)) {
            return yield* concurrencyView(f, manager, request, { errors: input.failure, draft: { field, key: name ?? "", slots: first(form, "slots") ?? "" } }, 400)
          }
          const { key, slots } = input.success
          const written = yield* (field === "key" ? manager.addOrUpdateLimit(key, slots) : manager.addOrUpdateGroupLimit(key, slots)).pipe(
            Effect.catchTag("InvalidPolicy", (e) => Effect.succeed(e))
          )
          if (written !== undefined) {
            return yield* concurrencyView(f, manager, request, { errors: [{ field, message: written.message }] }, 400)
          }
          return seeOtherWithFlash(
            back,
            nonce,
            field === "key"
              ? `Saved: '${key}' now runs with ${Pages.slots(slots)} from the next pickup.`
              : `Saved: group '${key}' is now capped at ${Pages.slots(slots)} in total from the next pickup.`
          )
        }
        case "delete":
        case "delete-group": {
          const key = LimitForm.parseKey(name, field)
          if (Result.isFailure(key)) return yield* concurrencyView(f, manager, request, { errors: key.failure }, 400)
          const removed = yield* (field === "key" ? manager.removeLimit(key.success) : manager.removeGroupLimit(key.success))
          const what = field === "key" ? `'${key.success}'` : `group '${key.success}'`
          return seeOtherWithFlash(
            back,
            nonce,
            removed
              ? `Deleted the override of ${what}: its declared limit applies again from the next pickup.`
              : `There was no override of ${what} (already removed).`
          )
        }
        default:
          return yield* concurrencyView(f, manager, request, { errors: [{ field: "key", message: "Unknown action." }] }, 400)
      }
    })
  )

  const at = (path: string) => `${prefix}${path}` as HttpRouter.PathInput
  const home = seeOther(`${prefix}/jobs`)
  // the router ignores a trailing slash: "/warp" also answers "/warp/"
  return [
    HttpRouter.route("GET", prefix === "" ? "/" : at(""), Effect.succeed(home)),
    HttpRouter.route("GET", at("/jobs"), jobs),
    HttpRouter.route("GET", at("/jobs/:id"), job),
    HttpRouter.route("POST", at("/actions"), actionPost),
    HttpRouter.route("GET", at("/bulk"), bulkConfirm),
    HttpRouter.route("POST", at("/bulk"), bulkPost),
    HttpRouter.route("GET", at("/assets/refresh.js"), refreshScript),
    HttpRouter.route("GET", at("/counters"), counters),
    HttpRouter.route("GET", at("/workers"), workers),
    HttpRouter.route("GET", at("/concurrency"), concurrency),
    HttpRouter.route("GET", at("/keys"), keys),
    HttpRouter.route("POST", at("/concurrency"), concurrencyPost)
  ] as const
}

/** A dashboard served by {@link layer}. */
export class DashboardServer extends Context.Service<
  DashboardServer,
  {
    /** The dashboard's address, e.g. "http://127.0.0.1:8080/warp". */
    readonly url: string
  }
>()("warp/DashboardServer") {}

/** The URL of the dashboard served by {@link layer}. */
export const url: Effect.Effect<string, never, DashboardServer> = DashboardServer.useSync((s) => s.url)

const formatUrl = (address: NetAddress.SocketAddress, prefix: string): string => {
  if (address._tag === "UnixPathAddress") return `unix:${address.path}${prefix}`
  const ip = NetAddress.formatIp(address.address)
  const host = ip === "0.0.0.0" || ip === "::" ? "localhost" : ip
  return `http://${host.includes(":") ? `[${host}]` : host}:${address.port}${prefix}`
}

/**
 * Serves the dashboard on its own HTTP server (platform-node), loopback only unless `host` says
 * otherwise. Provide it with the app's layers: it needs a `JobStore`, and shows the concurrency page
 * when a `ConcurrencyLimitManager` is among them. Read the address with {@link url}.
 */
export const layer = (options: ServeOptions = {}): Layer.Layer<DashboardServer, ServeError | MissingPeerDependency, JobStore> => {
  const prefix = normalizePrefix(options.prefix ?? "/warp")
  const notFound = Effect.map(Effect.serviceOption(ConcurrencyLimitManager), (m) =>
    page(Pages.message({ prefix, concurrency: Option.isSome(m) }, "Not found", "There is no page at this address."), 404)
  )
  const served = Layer.unwrap(
    Effect.map(HttpRouter.toHttpEffect(router(options)), (routed) => {
      const app = Effect.catchReason(routed, "HttpServerError", "RouteNotFound", () => notFound)
      return HttpServer.serve(Effect.tapDefect(app, (cause) => Effect.logError("warp dashboard: request failed", cause)))
    })
  )
  const address = Layer.effect(
    DashboardServer,
    Effect.map(HttpServer.HttpServer, (server) => ({ url: formatUrl(server.address, prefix) }))
  )
  const server = Layer.unwrap(
    Effect.map(
      importPeer("@effect/platform-node", "Dashboard.layer (warp-effect/dashboard)", () => import("@effect/platform-node/NodeHttpServer")),
      (NodeHttpServer) => NodeHttpServer.layer(createServer, { port: options.port ?? 0, host: options.host ?? "127.0.0.1" })
    )
  )
  return Layer.merge(served, address).pipe(Layer.provide(server))
}
