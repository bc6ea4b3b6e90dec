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

install_missing() {
  local missing=() pkg
  if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "demo.sh: not a Debian system; assuming the dependencies are installed" >&2
    return 0
  fi
  for pkg in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
      missing+=("$pkg")
    fi
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  echo "demo.sh: installing ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    sudo=(sudo)
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
}

install_missing cmake gcc make pkg-config redis-server \
  libhiredis-dev libuv1-dev uuid-dev

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
