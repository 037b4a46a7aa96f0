#!/usr/bin/env bash
# Tools the tests need beyond Python packages. Under CI=true a missing one is an error, never a skip.
set -euo pipefail

# Prometheus (Debian package, 2.42): billing's collection tests scrape the simulated exporters with it.
if ! command -v prometheus >/dev/null; then
  echo "test tools: installing prometheus"
  if ! { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y prometheus; }; then
    echo "test tools: could not install prometheus (apt-get install -y prometheus)" >&2
    exit 1
  fi
fi
echo "test tools: $(prometheus --version 2>&1 | head -n1)"
