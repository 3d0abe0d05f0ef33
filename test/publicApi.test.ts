/**
 * The public API: every declaration reachable from a package entry (`warp-effect`, `/testing`,
 * `/provider`, `/redis`, `/dashboard`) carries JSDoc with `@since` and `@category`, and the names the entries
 * export are exactly the reviewed lists below (a new export must be added here on purpose).
 */
import { describe, expect, it } from "@effect/vitest"
import { fileURLToPath } from "node:url"
import ts from "typescript"

const root = fileURLToPath(new URL("..", import.meta.url))
const entries = ["index", "testing", "testing/vitest", "provider", "redis", "dashboard"] as const
const program = ts.createProgram(
  entries.map((e) => `${root}src/${e}.ts`),
  { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, strict: true, noEmit: true, skipLibCheck: true, types: ["node"] }
)
const checker = program.getTypeChecker()

const relative = (node: ts.Node) => {
  const sf = node.getSourceFile()
  const { line } = sf.getLineAndCharacterOfPosition(node.getStart())
  return `${sf.fileName.slice(root.length)}:${line + 1}`
}

/** What a declaration's JSDoc lacks: "JSDoc", "@since", "@category" (empty when complete). */
export const missingDocs = (node: ts.Node): Array<string> => {
  // Only the comment right above the declaration counts (not a file comment before it).
  const doc = ts.getJSDocCommentsAndTags(node).filter(ts.isJSDoc).at(-1)
  if (doc === undefined) return ["JSDoc", "@since", "@category"]
  const tags = (doc.tags ?? []).map((t) => t.tagName.text)
  return [...(tags.includes("since") ? [] : ["@since"]), ...(tags.includes("category") ? [] : ["@category"])]
}

interface Walk {
  /** Export names, namespaces as `Ns.member`. */
  readonly names: Array<string>
  /** `path:line name: what is missing`. */
  readonly problems: Array<string>
}

const walkModule = (moduleSymbol: ts.Symbol, prefix: string, out: Walk, seen: Set<ts.Symbol>) => {
  for (const exported of checker.getExportsOfModule(moduleSymbol)) {
    const name = prefix + exported.name
    out.names.push(name)
    const own = exported.declarations ?? []
    const namespaceExport = own.find(ts.isNamespaceExport)
    if (namespaceExport) {
      // `export * as X from "./X.js"`: the statement is documented, then every member of X.
      const missing = missingDocs(namespaceExport.parent)
      if (missing.length > 0) out.problems.push(`${relative(namespaceExport)} ${name}: ${missing.join(", ")}`)
      const target = checker.getAliasedSymbol(exported)
      if (!seen.has(target)) walkModule(target, `${name}.`, out, new Set([...seen, target]))
      continue
    }
    const resolved = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported
    for (const declaration of resolved.declarations ?? []) {
      const node = ts.isVariableDeclaration(declaration) ? declaration.parent.parent : declaration
      const missing = missingDocs(ts.isVariableStatement(node) ? node.declarationList.declarations[0]! : node)
      if (missing.length > 0) out.problems.push(`${relative(declaration)} ${name}: ${missing.join(", ")}`)
    }
  }
}

const walk = (entry: string): Walk => {
  const sf = program.getSourceFile(`${root}src/${entry}.ts`)!
  const out: Walk = { names: [], problems: [] }
  const symbol = checker.getSymbolAtLocation(sf)!
  walkModule(symbol, "", out, new Set([symbol]))
  out.names.sort()
  return out
}

describe("public API", () => {
  it.each(entries)("every export of %s has JSDoc with @since and @category", (entry) => {
    const { names, problems } = walk(entry)
    expect(names.length).toBeGreaterThan(0)
    expect(problems).toEqual([])
  })

  it("a declaration without @category is reported (the check can fail)", () => {
    const probe = ts.createSourceFile("probe.ts", "/** File. @category x */\n/**\n * Doc.\n *\n * @since 0.2.0\n */\nexport const x = 1\n/** @since 0.1.0\n @category models */\nexport type Y = 1\nexport const z = 2\n", ts.ScriptTarget.ES2022, true)
    const [x, y, z] = probe.statements
    expect(missingDocs((x as ts.VariableStatement).declarationList.declarations[0]!)).toEqual(["@category"])
    expect(missingDocs(y!)).toEqual([])
    expect(missingDocs((z as ts.VariableStatement).declarationList.declarations[0]!)).toEqual(["JSDoc", "@since", "@category"])
  })

  it("the exported names are the reviewed lists", () => {
    expect(Object.fromEntries(entries.map((e) => [e, walk(e).names]))).toEqual(EXPECTED)
  })
})

const EXPECTED = {
  index: [
    "CircuitBreaker",
    "CircuitBreakerAddon", "CircuitBreakerAddon.CircuitBreakerState", "CircuitBreakerAddon.CircuitBreakerStateService", "CircuitBreakerAddon.CircuitBreakerStoreError", "CircuitBreakerAddon.CircuitStatus", "CircuitBreakerAddon.addon", "CircuitBreakerAddon.layer", "CircuitBreakerAddon.layerMemory",
    "Concurrency", "Concurrency.ConcurrencyDraft", "Concurrency.ConcurrencyMetadata", "Concurrency.ConcurrencyMode", "Concurrency.ConcurrencyOptions", "Concurrency.ConcurrencyPolicy", "Concurrency.LimitFrom", "Concurrency.TotalCap", "Concurrency.addon", "Concurrency.cancelledText", "Concurrency.gateTotal", "Concurrency.layer", "Concurrency.layerMemoryLimits", "Concurrency.layerWithoutMigrations", "Concurrency.requeuedText",
    "ConcurrencyLimitManager", "ConcurrencyLimitManager.ConcurrencyGroupLimit", "ConcurrencyLimitManager.ConcurrencyLimit", "ConcurrencyLimitManager.ConcurrencyLimitManager", "ConcurrencyLimitManager.ConcurrencyLimitManagerService", "ConcurrencyLimitManager.LimitExpiry", "ConcurrencyLimitManager.LimitStoreError", "ConcurrencyLimitManager.layerMemory", "ConcurrencyLimitManager.layerPg", "ConcurrencyLimitManager.layerPgWithoutMigrations",
    "Contract", "Contract.AnyContract", "Contract.ContractOptions", "Contract.JobContract", "Contract.MessageContract", "Contract.RequestContract", "Contract.job", "Contract.message", "Contract.request",
    "Database", "Database.DatabaseOptions", "Database.DatabaseUnreachable", "Database.layer", "Database.layerFromEnv",
    "GlobalPolicies", "GlobalPolicies.GlobalPolicies", "GlobalPolicies.GlobalPoliciesService", "GlobalPolicies.fromRef", "GlobalPolicies.layer", "GlobalPolicies.none",
    "Handler", "Handler.AnyHandler", "Handler.AttemptInfo", "Handler.HandlerOptions", "Handler.JobHandler", "Handler.MessageHandler", "Handler.RequestHandler", "Handler.Requirements", "Handler.StreamHandler", "Handler.derive", "Handler.job", "Handler.message", "Handler.request", "Handler.stream",
    "Job", "Job.Attempt", "Job.CurrentAttempt", "Job.InvalidArgument", "Job.InvalidPayload", "Job.Job", "Job.JobDetail", "Job.JobLog", "Job.JobState", "Job.LogKind", "Job.NewJob", "Job.Outcome",
    "JobMetadata", "JobMetadata.JobMetadata", "JobMetadata.PolicyEntries", "JobMetadata.Source", "JobMetadata.decode", "JobMetadata.encode",
    "JobParameters", "JobParameters.ConcurrencyParameterOptions", "JobParameters.JobKeyMode", "JobParameters.JobKeyOptions", "JobParameters.JobParameters", "JobParameters.MetadataAccessor", "JobParameters.make",
    "JobStore", "JobStore.CancelRequest", "JobStore.CancelResult", "JobStore.JobFilter", "JobStore.JobPage", "JobStore.JobStore", "JobStore.JobStoreService", "JobStore.OperateResult", "JobStore.OperatorAction", "JobStore.SlotAuditFinding", "JobStore.StoreError", "JobStore.WorkerInfo", "JobStore.cancelText", "JobStore.operatorCause", "JobStore.replacedCause",
    "JobStoreMemory", "JobStoreMemory.layer", "JobStoreMemory.make",
    "JobStorePg", "JobStorePg.PgStoreOptions", "JobStorePg.layer", "JobStorePg.layerWith", "JobStorePg.layerWithoutMigrations", "JobStorePg.make", "JobStorePg.makeWith",
    "Migrations", "Migrations.MigrationRun", "Migrations.concurrency", "Migrations.core",
    "Mutex",
    "Pipeline", "Pipeline.Addon", "Pipeline.AddonServices", "Pipeline.Behavior",
    "Policy", "Policy.CircuitBreakerPolicy", "Policy.Declaration", "Policy.InvalidPolicy", "Policy.MAX_KEY_LENGTH", "Policy.RateLimitPolicy", "Policy.RetryOptions", "Policy.RetryPolicy", "Policy.TimeoutPolicy", "Policy.TimeoutScope",
    "Publisher", "Publisher.BatchParameters", "Publisher.BatchPublishError", "Publisher.InvalidBatchItem", "Publisher.PublishError", "Publisher.Publisher", "Publisher.PublisherService", "Publisher.Submitted", "Publisher.layer", "Publisher.make",
    "RateLimit",
    "RateLimitAddon", "RateLimitAddon.RateLimitStoreError", "RateLimitAddon.RateLimiter", "RateLimitAddon.RateLimiterService", "RateLimitAddon.addon", "RateLimitAddon.layer", "RateLimitAddon.layerMemory",
    "Recurring", "Recurring.InvalidRecurring", "Recurring.Recurring", "Recurring.make",
    "Registry", "Registry.Registered", "Registry.Registry", "Registry.RegistryInput", "Registry.RegistryService", "Registry.layer", "Registry.make",
    "Retention", "Retention.JobExpired", "Retention.PruneResult", "Retention.RetentionOptions", "Retention.RetentionOverride", "Retention.RetentionPlan", "Retention.StateRetention", "Retention.TerminalState", "Retention.resolve",
    "Retry",
    "Saga", "Saga.SagaHandler", "Saga.SagaStep", "Saga.saga",
    "Scheduler", "Scheduler.layer", "Scheduler.make",
    "Semaphore",
    "SemaphoreProvider", "SemaphoreProvider.SemaphoreError", "SemaphoreProvider.SemaphoreProvider", "SemaphoreProvider.SemaphoreProviderService", "SemaphoreProvider.Slot",
    "SemaphoreProviderMemory", "SemaphoreProviderMemory.layer", "SemaphoreProviderMemory.make",
    "SemaphoreProviderPg", "SemaphoreProviderPg.PgProviderOptions", "SemaphoreProviderPg.PgSlotConnection", "SemaphoreProviderPg.layer", "SemaphoreProviderPg.make",
    "SlotAudit", "SlotAudit.LeakedSlot", "SlotAudit.SlotAudit", "SlotAudit.SlotAuditError", "SlotAudit.SlotAuditOptions", "SlotAudit.SlotAuditReport", "SlotAudit.SlotAuditService", "SlotAudit.StuckHolder", "SlotAudit.layer", "SlotAudit.leakedGauge", "SlotAudit.stuckGauge", "SlotAudit.terminatedTotal",
    "Timeout",
    "Warp", "Warp.BuildError", "Warp.Services", "Warp.WarpOptions", "Warp.layer", "Warp.layerMemory",
    "Worker", "Worker.UnenforcedPolicy", "Worker.WorkerHandle", "Worker.WorkerOptions", "Worker.attemptsTotal", "Worker.layer", "Worker.make"
  ],
  testing: [
    "EmbeddedPostgres", "EmbeddedPostgres.EmbeddedServer", "EmbeddedPostgres.start",
    "TestRuntime", "TestRuntime.JobResult", "TestRuntime.NotSettled", "TestRuntime.RunOptions", "TestRuntime.RunResult", "TestRuntime.SimulatedFailure", "TestRuntime.Tally", "TestRuntime.enqueueWith", "TestRuntime.play", "TestRuntime.run",
    "Workload", "Workload.KeyDeclaration", "Workload.Mode", "Workload.Result", "Workload.Workload", "Workload.WorkloadJob", "Workload.WorkloadOptions", "Workload.arbitrary", "Workload.keys", "Workload.parameters", "Workload.result"
  ],
  "testing/vitest": [
    "ProviderContract", "ProviderContract.SuiteOptions", "ProviderContract.suite"
  ],
  provider: [
    "SemaphoreError",
    "SemaphoreProvider",
    "SemaphoreProviderService",
    "Slot",
    "slotName",
    "validateLimit"
  ],
  redis: [
    "MissingPeerDependency",
    "SemaphoreProviderRedis", "SemaphoreProviderRedis.RedisClient", "SemaphoreProviderRedis.RedisConnectionOptions", "SemaphoreProviderRedis.RedisLayerOptions", "SemaphoreProviderRedis.RedisProviderOptions", "SemaphoreProviderRedis.layer", "SemaphoreProviderRedis.make"
  ],
  dashboard: [
    "Dashboard", "Dashboard.Authorize", "Dashboard.DashboardOptions", "Dashboard.DashboardServer", "Dashboard.ServeOptions", "Dashboard.allowWrites", "Dashboard.layer", "Dashboard.readOnly", "Dashboard.router", "Dashboard.url",
    "MissingPeerDependency"
  ]
}
