#!/usr/bin/env bash
# Build the servers redturn's users run (Redis 7.2/7.4, Valkey 7.2/8.0)
# from the source tarballs in ../shared/servers, once: each build is cached
# under $REDTURN_SERVER_CACHE (default ~/.cache/redturn/servers), keyed by
# the tarball's checksum and the variant, so a second run reuses it.
#
#   bash scripts/servers.sh build NAME [--asan]   # prints the bin directory
#   bash scripts/servers.sh path NAME [--asan]    # the same, without building
#   bash scripts/servers.sh list                  # the NAMEs that can be built
#
# NAME is a tarball's name without .tar.gz (redis-7.4.1, valkey-8.0.1, ...).
# The bin directory holds redis-server, redis-cli and redis-sentinel (links
# to valkey-* for Valkey), so a test puts it first in PATH. --asan builds
# the server itself with AddressSanitizer (make SANITIZER=address), into
# which a module built with -fsanitize=address can be loaded.
#
# Exits 77 with a message on stderr when the sources are not there (a
# user's clone has no ../shared): callers skip, saying why. Concurrent
# builds of one variant wait for each other (flock).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src_dir=${REDTURN_SERVER_SOURCES:-$here/../shared/servers}
cache=${REDTURN_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/redturn/servers}

usage() {
  sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

list() {
  [ -d "$src_dir" ] || return 0
  (cd "$src_dir" && ls -- *.tar.gz 2>/dev/null | sed 's/\.tar\.gz$//')
}

# key NAME VARIANT: the cache entry's name (exits 77 without the sources).
key() {
  local tarball=$src_dir/$1.tar.gz
  if [ ! -f "$tarball" ]; then
    echo "servers.sh: $tarball not found: no server sources here (they come with the project's shared folder, not with a clone)" >&2
    exit 77
  fi
  echo "$1-$(sha256sum "$tarball" | cut -c1-16)$2"
}

build() {
  local name=$1 variant=$2 tarball=$src_dir/$1.tar.gz key dir log prog
  key=$(key "$name" "$variant")
  if [ -f "$src_dir/SHA256SUMS" ] &&
     ! (cd "$src_dir" && grep " $name.tar.gz\$" SHA256SUMS | sha256sum -c --quiet - >/dev/null 2>&1); then
    echo "servers.sh: $tarball does not match $src_dir/SHA256SUMS" >&2
    exit 1
  fi
  dir=$cache/$key
  mkdir -p "$cache"
  exec 9>"$cache/$key.lock"
  flock 9
  if [ ! -x "$dir/bin/redis-server" ]; then
    rm -rf "$dir"
    mkdir -p "$dir/bin"
    log=$dir/build.log
    echo "servers.sh: building $name${variant:+ ($variant)} in $dir (a few minutes, once)" >&2
    tar xzf "$tarball" -C "$dir"
    local make_args=(-j"$(nproc)" BUILD_TLS=yes)
    [ "$variant" = -asan ] && make_args+=(SANITIZER=address)
    if ! nice -n 5 make -C "$dir/$name" "${make_args[@]}" >"$log" 2>&1; then
      tail -n 30 "$log" >&2
      echo "servers.sh: building $name failed (log: $log)" >&2
      rm -rf "$dir/bin"
      exit 1
    fi
    for prog in server cli sentinel; do
      if [ -x "$dir/$name/src/redis-$prog" ]; then
        ln -sf "../$name/src/redis-$prog" "$dir/bin/redis-$prog"
      else
        ln -sf "../$name/src/valkey-$prog" "$dir/bin/redis-$prog"
      fi
    done
    # Only what the tests run is kept: the objects are most of the space.
    find "$dir/$name" -name '*.o' -delete
  fi
  flock -u 9
  echo "$dir/bin"
}

case "${1:-}" in
  build)
    [ $# -ge 2 ] || { usage >&2; exit 2; }
    variant=
    [ "${3:-}" = --asan ] && variant=-asan
    build "$2" "$variant"
    ;;
  path)
    [ $# -ge 2 ] || { usage >&2; exit 2; }
    variant=
    [ "${3:-}" = --asan ] && variant=-asan
    k=$(key "$2" "$variant")
    echo "$cache/$k/bin"
    ;;
  list) list ;;
  -h | --help) usage ;;
  *) usage >&2; exit 2 ;;
esac
