#!/usr/bin/env bash
# Build and run the redturn demo (examples/demo.c).
#
#   bash scripts/demo.sh [demo arguments...]
#
# Installs missing Debian packages, builds build/examples/redturn-demo and
# runs it. Without REDTURN_URL in the environment a throwaway redis-server
# is started for the run and stopped afterwards; with it, the demo uses
# that server (e.g. REDTURN_URL=redis://127.0.0.1:6379).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=scripts/install-missing.sh
source scripts/install-missing.sh

install_missing cmake gcc make pkg-config redis-server \
  libhiredis-dev libuv1-dev

# A fresh build/ skips the tests (they need Criterion); an existing one keeps
# its settings (scripts/test.sh turns the tests on).
if [ -f build/CMakeCache.txt ]; then
  cmake -S . -B build >/dev/null
else
  cmake -S . -B build -DBUILD_TESTING=OFF >/dev/null
fi
cmake --build build -j2 --target demo

demo=build/examples/redturn-demo
if [ ! -x "$demo" ]; then
  echo "demo.sh: $demo was not built" >&2
  exit 1
fi

if [ -z "${REDTURN_URL:-}" ]; then
  # shellcheck source=scripts/start-redis.sh
  source scripts/start-redis.sh
  trap rt_redis_stop EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  rt_redis_start
  export REDTURN_URL="redis://127.0.0.1:${RT_REDIS_PORT}"
  echo "demo.sh: started redis-server on ${REDTURN_URL}"
fi

status=0
"$demo" "$@" || status=$?
exit "$status"
