#!/usr/bin/env node
/**
 * Rewrites deep imports of `src/internal/...` in test/ and examples/ to the package's public entries
 * (`warp-effect`, `warp-effect/testing`, `warp-effect/provider`, `warp-effect/redis`, `warp-effect/dashboard`) wherever every
 * name the import brings in is public under the same name; anything else stays a deep import (tests of
 * internals keep theirs). Rerunnable: `node scripts/rewrite-imports.mjs [files or directories...]`
 * (default: test examples). Prints the files it changed.
 *
 * How it knows what is public: each public module under src/ (src/Contract.ts, src/testing/*.ts, ...)
 * re-exports internals as `export const A = internal.A` / `export type A = internal.A`; each entry
 * (src/index.ts, src/testing.ts, ...) has `export * as Ns from "./Module.js"` (a namespace) or
 * `export { A } from "./Module.js"` (a top-level name).
 *
 * `warp-effect/testing/vitest` loads vitest, so only `*.test.ts` files are pointed at it.
 */
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..")
const src = join(root, "src")
const entries = {
  "warp-effect": "index.ts",
  "warp-effect/testing": "testing.ts",
  "warp-effect/testing/vitest": "testing/vitest.ts",
  "warp-effect/provider": "provider.ts",
  "warp-effect/redis": "redis.ts",
  "warp-effect/dashboard": "dashboard.ts"
}

const parse = (file) => ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.ES2022, true)
const resolveTs = (from, spec) => resolve(dirname(from), spec).replace(/\.js$/, ".ts")
const exported = (node) => ts.canHaveModifiers(node) && (ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword)

// ---- what is public -----------------------------------------------------------------------------
/** `${internal file}#${internal name}` -> { module, name } for every re-export of a public module. */
const publicOf = new Map()
/** public module file -> [{ spec, namespace }] */
const namespaces = new Map()
/** `${public module file}#${name}` -> spec (top-level names of an entry) */
const topLevel = new Map()

const publicModules = [
  ...readdirSync(src).filter((f) => f.endsWith(".ts") && !Object.values(entries).includes(f)).map((f) => join(src, f)),
  ...["testing", "redis", "dashboard"].flatMap((d) => {
    try {
      return readdirSync(join(src, d)).filter((f) => f.endsWith(".ts") && !Object.values(entries).includes(`${d}/${f}`)).map((f) => join(src, d, f))
    } catch {
      return []
    }
  })
]
for (const file of publicModules) {
  const sf = parse(file)
  const aliases = new Map()
  for (const st of sf.statements) {
    if (ts.isImportDeclaration(st) && st.importClause?.namedBindings && ts.isNamespaceImport(st.importClause.namedBindings)) {
      const target = resolveTs(file, st.moduleSpecifier.text)
      if (target.startsWith(join(src, "internal"))) aliases.set(st.importClause.namedBindings.name.text, target)
    }
  }
  const record = (name, init) => {
    // `internal.B` or `internal.B<...>`
    const expr = ts.isTypeReferenceNode(init) ? init.typeName : init
    const left = ts.isPropertyAccessExpression(expr) ? expr.expression : ts.isQualifiedName(expr) ? expr.left : undefined
    const right = ts.isPropertyAccessExpression(expr) ? expr.name : ts.isQualifiedName(expr) ? expr.right : undefined
    if (left && right && ts.isIdentifier(left) && aliases.has(left.text)) {
      publicOf.set(`${aliases.get(left.text)}#${right.text}`, { module: file, name })
    }
  }
  for (const st of sf.statements) {
    if (!exported(st)) continue
    if (ts.isVariableStatement(st)) {
      for (const d of st.declarationList.declarations) if (ts.isIdentifier(d.name) && d.initializer) record(d.name.text, d.initializer)
    } else if (ts.isTypeAliasDeclaration(st)) record(st.name.text, st.type)
  }
}
for (const [spec, entry] of Object.entries(entries)) {
  const file = join(src, entry)
  for (const st of parse(file).statements) {
    if (!ts.isExportDeclaration(st) || !st.moduleSpecifier) continue
    const target = resolveTs(file, st.moduleSpecifier.text)
    if (st.exportClause && ts.isNamespaceExport(st.exportClause)) {
      namespaces.set(target, [...(namespaces.get(target) ?? []), { spec, namespace: st.exportClause.name.text }])
    } else if (st.exportClause && ts.isNamedExports(st.exportClause)) {
      for (const e of st.exportClause.elements) {
        if (!e.propertyName || e.propertyName.text === e.name.text) topLevel.set(`${target}#${e.name.text}`, spec)
      }
    }
  }
}

// ---- rewriting one file -------------------------------------------------------------------------
const rewrite = (file) => {
  const text = readFileSync(file, "utf8")
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true)
  const isTest = file.endsWith(".test.ts")
  const allowed = (spec) => spec !== "warp-effect/testing/vitest" || isTest
  /** `X.member` uses of each identifier, or null when X is used otherwise. */
  const members = new Map()
  const visit = (node) => {
    if ((ts.isPropertyAccessExpression(node) && ts.isIdentifier(node.expression)) || (ts.isQualifiedName(node) && ts.isIdentifier(node.left))) {
      const id = ts.isPropertyAccessExpression(node) ? node.expression : node.left
      const member = ts.isPropertyAccessExpression(node) ? node.name.text : node.right.text
      if (members.get(id.text) !== null) members.set(id.text, [...(members.get(id.text) ?? []), member])
      return
    }
    if (ts.isIdentifier(node) && !ts.isImportSpecifier(node.parent) && !ts.isNamespaceImport(node.parent)) members.set(node.text, null)
    ts.forEachChild(node, visit)
  }
  for (const st of sf.statements) if (!ts.isImportDeclaration(st)) visit(st)

  const edits = [] // { start, end, text }
  const added = new Map() // spec -> Map(local -> specifier text)
  let anchor
  /** Deletes a statement and its line break (leading comments stay). */
  const remove = (st) => ({ start: st.getStart(sf), end: text[st.getEnd()] === "\n" ? st.getEnd() + 1 : st.getEnd(), text: "" })
  const add = (spec, local, specText) => {
    if (!added.has(spec)) added.set(spec, new Map())
    added.get(spec).set(local, specText)
  }
  for (const st of sf.statements) {
    if (!ts.isImportDeclaration(st) || !st.importClause || !st.moduleSpecifier.text.startsWith(".")) continue
    const target = resolveTs(file, st.moduleSpecifier.text)
    if (!target.startsWith(join(src, "internal"))) continue
    const clause = st.importClause
    const typeOnly = clause.isTypeOnly
    if (clause.name) continue // default import
    const bindings = clause.namedBindings
    if (!bindings) continue
    if (ts.isNamespaceImport(bindings)) {
      const local = bindings.name.text
      const used = members.get(local)
      if (!used) continue
      // one public module that re-exports every used member under its own name
      const modules = new Set(used.map((m) => publicOf.get(`${target}#${m}`)).map((p) => (p ? p.module : undefined)))
      const [module] = modules
      if (modules.size !== 1 || module === undefined) continue
      if (!used.every((m) => publicOf.get(`${target}#${m}`).name === m)) continue
      const ns = (namespaces.get(module) ?? []).find((n) => allowed(n.spec))
      if (!ns) continue
      add(ns.spec, local, `${typeOnly ? "type " : ""}${ns.namespace === local ? local : `${ns.namespace} as ${local}`}`)
      anchor ??= st
      edits.push(remove(st))
    } else {
      const keep = []
      for (const el of bindings.elements) {
        const imported = (el.propertyName ?? el.name).text
        const pub = publicOf.get(`${target}#${imported}`)
        const spec = pub && pub.name === imported ? topLevel.get(`${pub.module}#${imported}`) : undefined
        if (spec && allowed(spec)) {
          add(spec, el.name.text, `${typeOnly || el.isTypeOnly ? "type " : ""}${imported === el.name.text ? imported : `${imported} as ${el.name.text}`}`)
        } else keep.push(el.getText(sf))
      }
      if (keep.length === bindings.elements.length) continue
      anchor ??= st
      const rest = keep.length === 0 ? "" : `import ${typeOnly ? "type " : ""}{ ${keep.join(", ")} } from ${st.moduleSpecifier.getText(sf)}\n`
      edits.push({ ...remove(st), text: rest })
    }
  }
  if (added.size === 0) return false

  // merge into existing `import { ... } from "warp-effect..."` declarations, else add one at the anchor
  const sortKey = (s) => s.replace(/^type /, "").toLowerCase()
  const render = (specs) => {
    const sorted = [...specs].sort((a, b) => (sortKey(a) < sortKey(b) ? -1 : sortKey(a) > sortKey(b) ? 1 : 0))
    const one = `{ ${sorted.join(", ")} }`
    return one.length <= 100 ? one : `{\n${sorted.map((s) => `  ${s}`).join(",\n")}\n}`
  }
  const newImports = []
  for (const [spec, locals] of added) {
    const existing = sf.statements.find(
      (st) => ts.isImportDeclaration(st) && st.moduleSpecifier.text === spec && st.importClause && !st.importClause.name && st.importClause.namedBindings && ts.isNamedImports(st.importClause.namedBindings)
    )
    if (existing) {
      const clause = existing.importClause
      const have = clause.namedBindings.elements.map((el) => `${clause.isTypeOnly || el.isTypeOnly ? "type " : ""}${el.getText(sf).replace(/^type /, "")}`)
      const haveLocals = new Set(clause.namedBindings.elements.map((el) => el.name.text))
      const merged = [...have, ...[...locals].filter(([local]) => !haveLocals.has(local)).map(([, s]) => s)]
      edits.push({ start: existing.getStart(sf), end: existing.getEnd(), text: `import ${render(merged)} from "${spec}"` })
    } else newImports.push(`import ${render([...locals.values()])} from "${spec}"`)
  }
  if (newImports.length > 0) {
    const at = edits.find((e) => e.start === anchor.getStart(sf))
    at.text = `${newImports.join("\n")}\n${at.text}`
  }
  let out = text
  for (const e of edits.sort((a, b) => b.start - a.start)) out = out.slice(0, e.start) + e.text + out.slice(e.end)
  if (out === text) return false
  writeFileSync(file, out)
  return true
}

const walk = (path) =>
  statSync(path).isDirectory()
    ? readdirSync(path).flatMap((f) => (f === "node_modules" ? [] : walk(join(path, f))))
    : path.endsWith(".ts") ? [path] : []
const targets = (process.argv.slice(2).length > 0 ? process.argv.slice(2) : ["test", "examples"]).map((p) => resolve(root, p))
for (const file of targets.flatMap(walk)) if (rewrite(file)) console.log(relative(root, file))
