#!/usr/bin/env bash
# Tools the tests need beyond Python packages. Under CI=true a missing one is an error, never a skip.
#   - node + npm, and tests/oidc/node_modules (npm ci): the real OpenID provider (npm oidc-provider)
#   - chromium at /usr/bin/chromium: the browser sign-in test (PyPI playwright drives it; never
#     `playwright install`)
set -euo pipefail
cd "$(dirname "$0")/.."
ci="${CI:-false}"
problem() {
  if [ "$ci" = "true" ]; then echo "install-test-tools: $1" >&2; exit 1; fi
  echo "install-test-tools: $1 (the tests that need it will say so)" >&2
}
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  as_root apt-get update -q && as_root apt-get install -y -q nodejs npm || problem "node and npm are missing"
fi
if command -v npm >/dev/null; then
  (cd tests/oidc && npm ci --no-audit --no-fund --loglevel=error) || problem "npm ci in tests/oidc failed"
fi

if [ ! -x /usr/bin/chromium ]; then
  { as_root apt-get update -q && as_root apt-get install -y -q chromium; } || problem "chromium is missing"
fi
echo "test tools: node $(node --version 2>/dev/null || echo missing), oidc-provider" \
  "$(node -p 'require("./tests/oidc/node_modules/oidc-provider/package.json").version' 2>/dev/null || echo missing)," \
  "$(/usr/bin/chromium --version 2>/dev/null || echo 'chromium missing')"
