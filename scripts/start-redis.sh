#!/usr/bin/env bash
# Start and stop a throwaway redis-server on a free loopback port, with no
# persistence and its files under a temporary directory.
#
# The shell face of tools/rtserver.h, the C launcher of the CLI demo, the
# benchmark, the tests and the fault suite: the same command line
# (--port P --bind 127.0.0.1 --save '' --appendonly no --daemonize no
# --dir D --logfile D/redis.log --enable-debug-command local, then the
# extra arguments), the same directory (<TMPDIR>/redturn-redis.XXXXXX
# holding redis.log and stdout.log), the same check that the answer comes
# from our pid, the same stop (SIGTERM, SIGKILL after a bound). It stays in
# shell because scripts/test.sh starts Redis before anything is built.
# Change the two together.
#
# Sourced (the usual way):
#   source scripts/start-redis.sh
#   rt_redis_start [extra redis-server args...]   # sets RT_REDIS_PORT,
#   trap rt_redis_stop EXIT                       # RT_REDIS_PID, RT_REDIS_DIR
#
# Run as a command:
#   eval "$(bash scripts/start-redis.sh start)"   # prints the three variables
#   bash scripts/start-redis.sh stop "$RT_REDIS_PID" "$RT_REDIS_DIR"
#
# The tests' module mode: with REDTURN_TEST_MODULE naming the project's
# redturn_module.so, the server also gets "--loadmodule <it>" (unless the
# arguments load a module themselves), as tools/rtserver.h does.
#
# Functions return non-zero on failure (they never exit the caller's shell,
# and are safe under set -euo pipefail).

# Pick a port, start redis-server on it in the background and wait until it
# answers PING. Retries with another port if the port was taken.
rt_redis_start() {
  local server cli dir port pid attempt waited info
  server=$(command -v redis-server) || {
    echo "start-redis: redis-server not found in PATH" >&2
    return 1
  }
  cli=$(command -v redis-cli) || {
    echo "start-redis: redis-cli not found in PATH" >&2
    return 1
  }
  dir=$(mktemp -d "${TMPDIR:-/tmp}/redturn-redis.XXXXXX") || return 1
  if [ -n "${REDTURN_TEST_MODULE:-}" ] && [[ " $* " != *" --loadmodule "* ]]; then
    set -- "$@" --loadmodule "$REDTURN_TEST_MODULE"
  fi

  for attempt in 1 2 3 4 5 6 7 8 9 10; do
    port=$((20000 + RANDOM % 20001))
    if rt__redis_port_busy "$port"; then
      continue
    fi
    # enable-debug-command: tests may use DEBUG SLEEP and friends from
    # loopback; the server is private to this run.
    "$server" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
      --daemonize no --dir "$dir" --logfile "$dir/redis.log" \
      --enable-debug-command local "$@" >"$dir/stdout.log" 2>&1 &
    pid=$!
    # Wait (10 s at most) until it answers; give up on this port at once if
    # the server died, e.g. because another process took the port first.
    waited=0
    while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt 100 ]; do
      if [ "$("$cli" -h 127.0.0.1 -p "$port" ping 2>/dev/null)" = "PONG" ]; then
        # Make sure the PONG came from our server, not from a stranger.
        info=$("$cli" -h 127.0.0.1 -p "$port" info server 2>/dev/null) || info=
        info=${info//$'\r'/}
        if [[ $'\n'"$info"$'\n' == *$'\n'"process_id:$pid"$'\n'* ]]; then
          RT_REDIS_PORT=$port
          RT_REDIS_PID=$pid
          RT_REDIS_DIR=$dir
          export RT_REDIS_PORT RT_REDIS_PID RT_REDIS_DIR
          return 0
        fi
        break
      fi
      sleep 0.1
      waited=$((waited + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
      if [ "$waited" -ge 100 ]; then
        echo "start-redis: redis-server on port $port did not answer within 10 s" >&2
        cat "$dir/redis.log" "$dir/stdout.log" >&2 2>/dev/null || true
        rm -rf "$dir"
        return 1
      fi
    else
      wait "$pid" 2>/dev/null || true
    fi
    echo "start-redis: attempt $attempt on port $port failed, retrying" >&2
  done
  echo "start-redis: could not start redis-server; last log:" >&2
  cat "$dir/redis.log" "$dir/stdout.log" >&2 2>/dev/null || true
  rm -rf "$dir"
  return 1
}

# 0 if something already listens on 127.0.0.1:port.
rt__redis_port_busy() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Stop the server started by rt_redis_start (or the pid and dir given) and
# remove its directory. Safe to call twice, and when nothing was started.
rt_redis_stop() {
  local pid=${1:-${RT_REDIS_PID:-}} dir=${2:-${RT_REDIS_DIR:-}} _
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      kill -9 "$pid" 2>/dev/null || true
    fi
    # Reaps it when it is our child; harmless otherwise.
    wait "$pid" 2>/dev/null || true
  fi
  case "$dir" in
    */redturn-redis.*) rm -rf "$dir" ;;
  esac
  if [ -z "${1:-}" ]; then
    unset RT_REDIS_PORT RT_REDIS_PID RT_REDIS_DIR
  fi
  return 0
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
    start)
      shift
      rt_redis_start "$@" || exit 1
      printf 'RT_REDIS_PORT=%s\nRT_REDIS_PID=%s\nRT_REDIS_DIR=%s\n' \
        "$RT_REDIS_PORT" "$RT_REDIS_PID" "$RT_REDIS_DIR"
      ;;
    stop)
      [ -n "${2:-}" ] || { echo "usage: $0 stop PID [DIR]" >&2; exit 2; }
      rt_redis_stop "$2" "${3:-}"
      ;;
    *)
      echo "usage: $0 start [redis-server args...] | stop PID [DIR]" >&2
      exit 2
      ;;
  esac
fi
