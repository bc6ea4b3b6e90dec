#!/usr/bin/env bash
# Render the plots of docs/PERFORMANCE.md from a benchmark run's data.
#
#   bash scripts/plot.sh [DATA_DIR] [OUT_DIR]
#
# DATA_DIR holds what `redturn-bench --data DIR` wrote (grants.dat,
# handoff-<point>-<mode>[-<path>].dat); default build-bench/results, as left by
# scripts/bench.sh. Writes OUT_DIR/perf-handoff.png (handoff latency CDF,
# each script path vs spin) and OUT_DIR/perf-grants.png (grants per second per scale
# point); OUT_DIR defaults to docs. Uses gnuplot (Debian: gnuplot-nox),
# installed when missing; see bench/plot.gp.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

data=${1:-build-bench/results}
out=${2:-docs}

if ! command -v gnuplot >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "plot.sh: installing gnuplot-nox"
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then
      sudo=(sudo)
    fi
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y gnuplot-nox
  else
    echo "plot.sh: gnuplot not found" >&2
    exit 1
  fi
fi

for f in grants.dat handoff-hot-spin.dat; do
  if [ ! -f "$data/$f" ]; then
    echo "plot.sh: $data/$f missing (run scripts/bench.sh first)" >&2
    exit 1
  fi
done
mkdir -p "$out"

# The fair rows' script paths the run had at the hot key (and, for the
# deep curves, at the deep point too).
paths=""
for p in module functions eval; do
  if [ -f "$data/handoff-hot-fair-$p.dat" ]; then
    paths="$paths${paths:+ }$p"
  fi
done
if [ -z "$paths" ]; then
  echo "plot.sh: no $data/handoff-hot-fair-<path>.dat (run scripts/bench.sh first)" >&2
  exit 1
fi
havedeep=1
for p in $paths spin; do
  case $p in spin) f=handoff-deep-spin.dat ;; *) f=handoff-deep-fair-$p.dat ;; esac
  if [ ! -f "$data/$f" ]; then
    havedeep=0
  fi
done
gnuplot -e "datadir='$data'; outdir='$out'; havedeep=$havedeep; paths='$paths'" bench/plot.gp
ls -l "$out/perf-handoff.png" "$out/perf-grants.png"
