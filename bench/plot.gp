# gnuplot script for docs/PERFORMANCE.md (run through scripts/plot.sh).
# Variables: datadir (redturn-bench --data output), outdir (PNG files).

set terminal pngcairo size 760,420 font "DejaVu Sans,9" noenhanced
set datafile missing "NaN"
set grid lc rgb "#dddddd"
set key top left

hf(p, m) = sprintf("%s/handoff-%s-%s.dat", datadir, p, m)
if (!exists("havedeep")) havedeep = 0
# paths: the fair rows' script paths with a handoff file at the hot key
# ("module functions eval", those the run had), set by scripts/plot.sh.
if (!exists("paths")) paths = "functions eval"
pcolor(p) = p eq "module" ? "#2ca02c" : p eq "functions" ? "#1f77b4" : "#9467bd"

set output outdir . "/perf-handoff.png"
set title "Handoff latency: release call to the next holder's grant callback"
set xlabel "handoff latency (microseconds, log scale)"
set ylabel "fraction of handoffs (CDF)"
set logscale x
set xrange [5:*]
set yrange [0:1]
set key bottom right
if (havedeep) {
  plot for [p in paths] hf("hot", "fair-" . p) using 2:1 with lines lw 2 lc rgb pcolor(p) title "fair (" . p . "), hot key", \
       hf("hot", "spin") using 2:1 with lines lw 2 lc rgb "#d62728" title "spin (SET NX, 5 ms retry), hot key", \
       for [p in paths] hf("deep", "fair-" . p) using 2:1 with lines lw 1.5 dt 2 lc rgb pcolor(p) title "fair (" . p . "), 100 000 waiters", \
       hf("deep", "spin") using 2:1 with lines lw 1.5 dt 2 lc rgb "#d62728" title "spin, 100 000 waiters"
} else {
  plot for [p in paths] hf("hot", "fair-" . p) using 2:1 with lines lw 2 lc rgb pcolor(p) title "fair (" . p . "), hot key", \
       hf("hot", "spin") using 2:1 with lines lw 2 lc rgb "#d62728" title "spin (SET NX, 5 ms retry), hot key"
}

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
# grants.dat: point ping module functions eval spin (NaN: not in the run)
plot datadir . "/grants.dat" using 2:xtic(1) title "ping" lc rgb "#7f7f7f", \
     "" using 3 title "fair: module" lc rgb pcolor("module"), \
     "" using 4 title "fair: functions" lc rgb pcolor("functions"), \
     "" using 5 title "fair: eval" lc rgb pcolor("eval"), \
     "" using 6 title "spin (SET NX, 5 ms retry)" lc rgb "#d62728"
