#!/usr/bin/env bash
# Runs a command with PostgreSQL and Redis for the tests:
#   DATABASE_URL / REDIS_URL when set; else the machine's PostgreSQL on 127.0.0.1 with a database name of this
#   run's own and a throwaway Redis of this run's own; else throwaway instances of both started here (and
#   stopped on exit). Two runs on one machine therefore never share a test database, a queue or a lock.
#   Under CI=true, failing to find or start one is an error.
set -euo pipefail
tmp=$(mktemp -d)
run_id="run_$$_$(date +%s)"
cleanup() {
  # The run's database and the test databases made from its name: test_gpucloud_<run>, and with pytest -n
  # those of each xdist worker (gpucloud_<run>_gw0, test_gpucloud_<run>_gw0…), should a worker die undropped.
  [ -n "${own_database:-}" ] && command -v psql >/dev/null && for db in $(psql -Atq "$own_database" \
    -c "SELECT datname FROM pg_database WHERE position('gpucloud_$run_id' in datname) > 0" 2>/dev/null); do
    psql -q "$own_database" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 || true
  done
  [ -n "${pg_dir:-}" ] && runuser -u postgres -- "$pg_bin/pg_ctl" -D "$pg_dir" -m fast stop >/dev/null 2>&1 || true
  [ -n "${redis_pid:-}" ] && kill "$redis_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
reachable() { python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 1)" "$1" 2>/dev/null; }

if [ -z "${DATABASE_URL:-}" ]; then
  if reachable 5432; then
    # pytest-django creates test_<name>: a name per run keeps two runs from colliding on one test database.
    export DATABASE_URL="postgres://postgres@127.0.0.1:5432/gpucloud_$run_id"
    own_database="postgres://postgres@127.0.0.1:5432/postgres"
    # The database itself exists too: the processes some tests start connect to DATABASE_URL as it is.
    psql -q "$own_database" -c "CREATE DATABASE \"gpucloud_$run_id\"" >/dev/null
  else
    pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
    [ -n "$pg_bin" ] || { echo "PostgreSQL is not running and not installed (apt-get install postgresql)" >&2; exit 1; }
    pg_dir="$tmp/pg"; port=$(free_port)
    mkdir -p "$pg_dir"; chown postgres "$tmp" "$pg_dir"
    runuser -u postgres -- "$pg_bin/initdb" -D "$pg_dir" -A trust --no-sync -U postgres >/dev/null
    runuser -u postgres -- "$pg_bin/pg_ctl" -D "$pg_dir" -w -l "$pg_dir/log" \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $pg_dir -c fsync=off" start >/dev/null
    export DATABASE_URL="postgres://postgres@127.0.0.1:$port/gpucloud"
  fi
fi

if [ -z "${REDIS_URL:-}" ]; then
  # A Redis of this run's own where redis-server is installed: workers of two runs never eat each other's tasks.
  if ! command -v redis-server >/dev/null && reachable 6379; then
    export REDIS_URL="redis://127.0.0.1:6379/0"
  else
    command -v redis-server >/dev/null || { echo "Redis is not running and not installed (apt-get install redis-server)" >&2; exit 1; }
    port=$(free_port)
    redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no --dir "$tmp" --daemonize no >/dev/null &
    redis_pid=$!
    for _ in $(seq 50); do reachable "$port" && break; sleep 0.1; done
    export REDIS_URL="redis://127.0.0.1:$port/0"
  fi
fi

# Tests use their own Redis database so they never eat a developer's queued tasks.
export CELERY_BROKER_URL="${CELERY_BROKER_URL:-${REDIS_URL%/*}/15}"
export SECRET_KEY="${SECRET_KEY:-test-secret-key-not-for-production}"
export GPUCLOUD_ENCRYPTION_KEYS="${GPUCLOUD_ENCRYPTION_KEYS:-$(python3 -c 'import base64,os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())')}"
export GPUCLOUD_VAR_DIR="${GPUCLOUD_VAR_DIR:-$tmp/var}"
# The test servers (live_server, the OpenID provider) speak plain HTTP on loopback.
export GPUCLOUD_HTTPS="${GPUCLOUD_HTTPS:-false}"
echo "tests use DATABASE_URL=$DATABASE_URL CELERY_BROKER_URL=$CELERY_BROKER_URL"
"$@"
