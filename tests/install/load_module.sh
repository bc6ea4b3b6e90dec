#!/bin/sh
# load_module.sh SERVER CLI MODULE DIR VERSION: start SERVER on a unix
# socket in DIR (no TCP port) with --loadmodule MODULE, ask it
# redturn.version, stop it. Exits 0 when the module answered VERSION (the
# contract version, MODULE_VERSION in protocol/constants.txt); else prints
# the server's log.
server=$1 cli=$2 module=$3 dir=$4 want=$5
mkdir -p "$dir" || exit 1
sock=$dir/redis.sock
"$server" --port 0 --unixsocket "$sock" --dir "$dir" --save '' \
  --appendonly no --logfile "$dir/redis.log" --loadmodule "$module" &
pid=$!
answer=
i=0
while [ $i -lt 100 ]; do
  if ! kill -0 "$pid" 2>/dev/null; then
    break
  fi
  answer=$("$cli" -s "$sock" redturn.version 2>/dev/null) && [ -n "$answer" ] && break
  answer=
  sleep 0.1
  i=$((i + 1))
done
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
if [ "$answer" != "$want" ]; then
  echo "redturn.version answered '$answer' (want $want); the server's log:"
  cat "$dir/redis.log"
  exit 1
fi
echo "redturn.version answered $answer from the installed module"
