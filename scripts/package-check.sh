#!/usr/bin/env bash
# The package as a user gets it, end to end: `npm pack`, install the tarball into an empty project with
# the declared peers (plus @effect/platform-node for NodeRuntime), compile the README quick start there
# with a strict NodeNext tsc (skipLibCheck false), run the compiled JS with plain node against a real
# PostgreSQL (DATABASE_URL, else an embedded server) and expect its job to end Succeeded; `npm ls effect`
# must show one copy. Run from the project root: npm run test:package
set -euo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
ROOT=$PWD
SCR=$(mktemp -d "${TMPDIR:-/tmp}/warp-package-XXXXXX")
# The embedded server runs in this shell's child node process (no npx/tsx wrapper in between), which stops
# PostgreSQL on SIGTERM; the script keeps its own exit code whatever the server's shutdown returns.
cleanup() {
  local rc=$?
  if [ -n "${PG_PID:-}" ]; then kill "$PG_PID" 2>/dev/null || true; wait "$PG_PID" 2>/dev/null || true; fi
  rm -rf "$SCR"
  exit "$rc"
}
trap cleanup EXIT

npm pack --silent --pack-destination "$SCR" >"$SCR/pack.out"
TGZ="$SCR/$(tail -1 "$SCR/pack.out")"
peers=$(node -e '
  const p = require(process.argv[1]); const meta = p.peerDependenciesMeta || {};
  console.log(Object.entries(p.peerDependencies).filter(([n]) => !(meta[n] && meta[n].optional)).map(([n, r]) => `${n}@${r}`).join(" "))' "$ROOT/package.json")
platformNode=$(node -p 'require(process.argv[1]).peerDependencies["@effect/platform-node"]' "$ROOT/package.json")

C="$SCR/consumer"; mkdir -p "$C"; cd "$C"
echo '{"name":"consumer","private":true,"type":"module"}' >package.json
npm install --no-audit --no-fund --silent "$TGZ" $peers "@effect/platform-node@$platformNode" typescript@5 @types/node@22 >"$SCR/install.log" 2>&1 \
  || { echo "consumer install failed"; tail -20 "$SCR/install.log"; exit 1; }
copies=$(npm ls effect --all --parseable 2>/dev/null | sort -u | wc -l)
[ "$copies" -eq 1 ] || { echo "expected one copy of effect, found $copies"; npm ls effect --all; exit 1; }

cp "$ROOT/examples/readme/quickstart.ts" quickstart.ts
cat >tsconfig.json <<'JSON'
{ "compilerOptions": { "strict": true, "module": "NodeNext", "moduleResolution": "NodeNext", "target": "ES2022",
  "outDir": "out", "skipLibCheck": false, "exactOptionalPropertyTypes": true, "noUncheckedIndexedAccess": true,
  "types": ["node"] }, "files": ["quickstart.ts"] }
JSON
./node_modules/.bin/tsc -p . || { echo "the quick start does not compile against the packed package"; exit 1; }

URL="${DATABASE_URL:-}"
if [ -z "$URL" ]; then
  (cd "$ROOT" && exec node --import tsx scripts/embedded-postgres.ts) >"$SCR/pg.out" 2>&1 &
  PG_PID=$!
  for _ in $(seq 1 120); do URL=$(grep -m1 '^postgres://' "$SCR/pg.out" || true); [ -n "$URL" ] && break; sleep 0.5; done
  [ -n "$URL" ] || { echo "embedded PostgreSQL did not start"; cat "$SCR/pg.out"; exit 1; }
fi
DB="warp_pkg_$$"
node -e 'const pg=require(process.argv[1]); const c=new pg.Client({connectionString:process.argv[2]}); c.connect().then(()=>c.query(`CREATE DATABASE ${process.argv[3]}`)).then(()=>c.end())' \
  "$ROOT/node_modules/pg" "$URL" "$DB"
DBURL=$(node -e 'const u=new URL(process.argv[1]); u.pathname="/"+process.argv[2]; console.log(u.toString())' "$URL" "$DB")
out=$(DATABASE_URL="$DBURL" timeout 120 node out/quickstart.js 2>&1) || { echo "quick start failed:"; echo "$out"; exit 1; }
node -e 'const pg=require(process.argv[1]); const c=new pg.Client({connectionString:process.argv[2]}); c.connect().then(()=>c.query(`DROP DATABASE IF EXISTS ${process.argv[3]} WITH (FORCE)`)).then(()=>c.end())' \
  "$ROOT/node_modules/pg" "$URL" "$DB"
echo "$out" | grep -qE 'job [0-9a-f-]+: Succeeded' || { echo "quick start ran but its job did not succeed:"; echo "$out"; exit 1; }
echo "package-check ok: packed, installed with peers ($peers), quick start compiled strictly and ran with plain node: $(echo "$out" | grep -oE 'job [0-9a-f-]+: Succeeded')"
