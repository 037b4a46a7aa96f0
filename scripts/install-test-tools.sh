#!/usr/bin/env bash
# Tools the tests need beyond Python packages. Under CI=true a missing one is an error, never a skip.
#   - node + npm, and tests/oidc/node_modules (npm ci): the real OpenID provider (npm oidc-provider)
#   - chromium at /usr/bin/chromium: the browser sign-in test (PyPI playwright drives it; never
#     `playwright install`)
#   - prometheus (Debian's 2.42): billing's collection tests scrape the simulated exporters with it
#   - checkov (PyPI) in a venv of its own, var/tools/checkov: it pins packaging, networkx, boto3… to versions
#     that would downgrade the project's; tests/test_deploy_kubernetes.py runs it on the rendered manifests
#   - focus-validator (the FinOps Foundation's, PyPI) in its own virtualenv under var/tools/: it pins
#     numpy < 2 and pulls pandas, pyarrow, polars and duckdb, which the project's venv must not get
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
# focus-validator, pinned: the test bridges two gaps of 2.0 by name. 2.x declares Python >= 3.12, but 2.0.2
# (unlike 2.1) runs on 3.11, hence --ignore-requires-python; its numpy pin (< 2) holds, so pyarrow is kept
# below 21 (20 runs with numpy 1.26; 26 needs numpy 2).
fv=var/tools/focus-validator
if [ ! -x "$fv/bin/focus-validator" ]; then
  { python3 -m venv "$fv" && "$fv/bin/pip" install -q --disable-pip-version-check --ignore-requires-python \
      focus-validator==2.0.2 'pyarrow<21'; } || problem "focus-validator could not be installed in $fv"
fi
echo "test tools: node $(node --version 2>/dev/null || echo missing), oidc-provider" \
  "$(node -p 'require("./tests/oidc/node_modules/oidc-provider/package.json").version' 2>/dev/null || echo missing)," \
  "$(/usr/bin/chromium --version 2>/dev/null || echo 'chromium missing'), $(prometheus --version 2>&1 | head -n1)," \
  "checkov $("$checkov/bin/checkov" --version 2>/dev/null || echo missing)," \
  "focus-validator $("$fv/bin/pip" show focus-validator 2>/dev/null | sed -n 's/^Version: //p' || echo missing)"
