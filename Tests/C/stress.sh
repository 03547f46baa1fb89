#!/usr/bin/env bash
# Several processes on one file at once: a C writer, a Swift writer, a C reader and a Swift reader
# for a few seconds; a third writer (C) is killed with SIGKILL halfway. Every process that was
# not killed must finish (nobody waits forever) and read only values that check out; a final
# pass by each language checks every key. Usage: stress.sh BUILD_DIR OUT_DIR [SECONDS]
set -uo pipefail
build="$1"; out="$2"; seconds="${3:-4}"
file="$out/stress.larder"
rm -f "$file"
c="$out/stress"
swift="$build/larder-stress"
limit=$(( ${seconds%.*} + 30 ))

timeout "$limit" "$c" writer "$file" "$seconds" 11 & cw=$!
timeout "$limit" "$swift" writer "$file" "$seconds" 22 & sw=$!
timeout "$limit" "$c" reader "$file" "$seconds" 33 & cr=$!
timeout "$limit" "$swift" reader "$file" "$seconds" 44 & sr=$!
"$c" writer "$file" 60 55 > /dev/null & victim=$!
sleep "$(( ${seconds%.*} / 2 ))"
kill -KILL "$victim"
wait "$victim" 2>/dev/null

status=0
for pid in $cw $sw $cr $sr; do
    wait "$pid" || { echo "stress: process $pid failed (exit $?)"; status=1; }
done
timeout 60 "$c" verify "$file" || status=1
timeout 60 "$swift" verify "$file" || status=1
if [ $status -eq 0 ]; then echo "multi-process stress: 6 passed, 0 failed"; else echo "multi-process stress: failed"; fi
exit $status
