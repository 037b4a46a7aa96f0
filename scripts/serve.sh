#!/usr/bin/env bash
# `make serve`: gpucloud's production processes on this machine — `gpucloud migrate`, then `gpucloud web`,
# `gpucloud worker` and `gpucloud scheduler` — against DATABASE_URL and CELERY_BROKER_URL (PostgreSQL and
# Redis). Ctrl-C stops all three; if one stops on its own, the others are stopped too.
set -euo pipefail
: "${DATABASE_URL:?make serve runs on PostgreSQL: set DATABASE_URL=postgres://… (make run is the embedded default)}"
: "${CELERY_BROKER_URL:?make serve runs on Redis: set CELERY_BROKER_URL=redis://…}"
# Served on loopback over plain HTTP; behind a TLS proxy set GPUCLOUD_HTTPS=true.
export GPUCLOUD_HTTPS="${GPUCLOUD_HTTPS:-false}"
gpucloud="${GPUCLOUD:-gpucloud}"

"$gpucloud" migrate
pids=()
stop() { kill -TERM "${pids[@]}" 2>/dev/null || true; wait; }
trap stop INT TERM
"$gpucloud" web --bind "${GPUCLOUD_BIND:-127.0.0.1:8000}" & pids+=($!)
"$gpucloud" worker & pids+=($!)
"$gpucloud" scheduler & pids+=($!)
echo "gpucloud is running on http://${GPUCLOUD_BIND:-127.0.0.1:8000}/ (web, worker, scheduler); Ctrl-C stops it" >&2
wait -n || true
stop
