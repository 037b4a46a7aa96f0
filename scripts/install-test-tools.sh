#!/usr/bin/env bash
# Tools the tests need beyond Python packages. Under CI=true a missing one is an error, never a skip.
#   - node + npm, and tests/oidc/node_modules (npm ci): the real OpenID provider (npm oidc-provider)
#   - chromium at /usr/bin/chromium: the browser sign-in test (PyPI playwright drives it; never
#     `playwright install`)
#   - prometheus (Debian's 2.42): billing's collection tests scrape the simulated exporters with it
#   - checkov (PyPI) in a venv of its own, var/tools/checkov: it pins packaging, networkx, boto3… to versions
#     that would downgrade the project's; tests/test_deploy_kubernetes.py runs it on the rendered manifests
set -euo pipefail
cd "$(dirname "$0")/.."
ci="${CI:-false}"
problem() {
  if [ "$ci" = "true" ]; then echo "install-test-tools: $1" >&2; exit 1; fi
  echo "install-test-tools: $1 (the tests that need it will say so)" >&2
}
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }
apt_updated=false
apt_install() {
  if [ "$apt_updated" = false ]; then as_root apt-get update -q || return 1; apt_updated=true; fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q "$@"
}

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  apt_install nodejs npm || problem "node and npm are missing"
fi
if command -v npm >/dev/null; then
  (cd tests/oidc && npm ci --no-audit --no-fund --loglevel=error) || problem "npm ci in tests/oidc failed"
fi
if [ ! -x /usr/bin/chromium ]; then
  apt_install chromium || problem "chromium is missing"
fi
if ! command -v prometheus >/dev/null; then
  apt_install prometheus || problem "prometheus is missing (apt-get install -y prometheus)"
fi
checkov=var/tools/checkov
if [ ! -x "$checkov/bin/checkov" ]; then
  { python3 -m venv "$checkov" && "$checkov/bin/pip" install -q --disable-pip-version-check 'checkov==3.3.30'; } \
    || problem "checkov could not be installed into $checkov"
fi
echo "test tools: node $(node --version 2>/dev/null || echo missing), oidc-provider" \
  "$(node -p 'require("./tests/oidc/node_modules/oidc-provider/package.json").version' 2>/dev/null || echo missing)," \
  "$(/usr/bin/chromium --version 2>/dev/null || echo 'chromium missing'), $(prometheus --version 2>&1 | head -n1)," \
  "checkov $("$checkov/bin/checkov" --version 2>/dev/null || echo missing)"
