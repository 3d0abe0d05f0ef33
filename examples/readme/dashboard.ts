import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Effect from "effect/Effect"
import * as HttpRouter from "effect/http/HttpRouter"
import type * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import * as Layer from "effect/Layer"
import { createServer } from "node:http"
import { Dashboard } from "warp-effect/dashboard"

// Who may edit admin limits: your app's own check (here, a header set by an authenticating proxy).
// Without `authorize` the dashboard is read-only.
const isOperator = (request: HttpServerRequest.HttpServerRequest) => Effect.succeed(request.headers["x-forwarded-user"] === "ops")

// Inside an existing Effect HTTP app, under /admin/warp:
export const app = Layer.mergeAll(
  HttpRouter.add("GET", "/", HttpServerResponse.text("my app")),
  Dashboard.router({ prefix: "/admin/warp", authorize: isOperator })
)
export const AppLive = HttpRouter.serve(app).pipe(Layer.provide(NodeHttpServer.layer(createServer, { port: 3000 })))

// Or on its own port (loopback only by default), printing where it is:
export const DashboardLive = Dashboard.layer({ port: 8080, authorize: isOperator })
export const logUrl = Effect.flatMap(Dashboard.url, (url) => Effect.log(`dashboard: ${url}`))
