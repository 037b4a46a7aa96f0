#!/usr/bin/env bash
# Tools the tests need beyond Python packages. Under CI=true a missing one is an error, never a skip.
set -euo pipefail
echo "test tools: nothing beyond Python packages yet"
