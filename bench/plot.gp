# gnuplot script for docs/PERFORMANCE.md (run through scripts/plot.sh).
# Variables: datadir (redturn-bench --data output), outdir (PNG files).

set terminal pngcairo size 760,420 font "DejaVu Sans,9" noenhanced
set datafile missing "NaN"
set grid lc rgb "#dddddd"
set key top left

hf(p, m) = sprintf("%s/handoff-%s-%s.dat", datadir, p, m)
if (!exists("havedeep")) havedeep = 0

# 1. Handoff latency: release call -> next holder's grant callback (CDF).
set output outdir . "/perf-handoff.png"
set title "Handoff latency: release call to the next holder's grant callback"
set xlabel "handoff latency (microseconds, log scale)"
set ylabel "fraction of handoffs (CDF)"
set logscale x
set xrange [5:*]
set yrange [0:1]
set key bottom right
if (havedeep) {
  plot hf("hot", "fair") using 2:1 with lines lw 2 lc rgb "#1f77b4" title "fair (redturn), hot key", \
       hf("hot", "spin") using 2:1 with lines lw 2 lc rgb "#d62728" title "spin (SET NX, 5 ms retry), hot key", \
       hf("deep", "fair") using 2:1 with lines lw 1.5 dt 2 lc rgb "#1f77b4" title "fair, deep queue (100 000 waiters)", \
       hf("deep", "spin") using 2:1 with lines lw 1.5 dt 2 lc rgb "#d62728" title "spin, deep queue (100 000 waiters)"
} else {
  plot hf("hot", "fair") using 2:1 with lines lw 2 lc rgb "#1f77b4" title "fair (redturn), hot key", \
       hf("hot", "spin") using 2:1 with lines lw 2 lc rgb "#d62728" title "spin (SET NX, 5 ms retry), hot key"
}

# 2. Grants per second at each scale point (ping: round trips per second).
unset logscale x
unset xrange
unset yrange
set output outdir . "/perf-grants.png"
set title "Grants per second per scale point (ping: single-connection round trips per second)"
set xlabel "scale point"
set ylabel "per second (log scale)"
set logscale y
set yrange [100:*]
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key top right
plot datadir . "/grants.dat" using 2:xtic(1) title "ping" lc rgb "#7f7f7f", \
     "" using 3 title "fair (redturn)" lc rgb "#1f77b4", \
     "" using 4 title "spin (SET NX, 5 ms retry)" lc rgb "#d62728"
