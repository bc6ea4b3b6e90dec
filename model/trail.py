"""Condense `spin -t -p -g` output of model/redturn.pml to one line per step
that changed a variable of Redis or of a client (scratch variables of the
running script, named s_*, are left out)."""
import re
import sys

seen = {}
step, who = "0", "init"
rows = []
for line in sys.stdin:
    m = re.match(r"\s*(\d+):\s+proc\s+(\d+) \((\w+)", line)
    if m:
        # env is process 0, monitor 1, init 2: client c is process c + 3
        step = m.group(1)
        who = m.group(3) if m.group(3) != "client" else \
            "client %d" % (int(m.group(2)) - 3)
        continue
    if line.startswith("pan:") or "assertion violated" in line:
        rows.append(("", "", line.strip()))
        continue
    m = re.match(r"\s+(\w+(?:\[\d+\])?(?:\.\w+)?) = (-?\d+)", line)
    if m and not m.group(1).startswith("s_"):
        k, v = m.group(1), m.group(2)
        if seen.get(k) != v:
            seen[k] = v
            rows.append((step, who, "%s=%s" % (k, v)))
last = None
buf = []
for step, who, text in rows:
    if (step, who) != last:
        if buf:
            print(" ".join(buf))
        buf = ["%s %s:" % (step, who)] if step else []
        last = (step, who)
    buf.append(text)
if buf:
    print(" ".join(buf))
