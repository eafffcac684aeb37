#!/usr/bin/env bash
# Runs a command until its process has used SECONDS of CPU time (user + system, all threads, from
# /proc/PID/stat), then interrupts it: on a shared machine a fuzzer at `nice -n 19` gets a fair
# measure of work, where wall time would depend on the neighbours. libFuzzer prints its final
# stats on the interrupt (with -print_final_stats=1). Exits with the command's status (0 when the
# budget ran out: libFuzzer's interrupt status 72 is taken as success).
#   fuzz/cpu_budget.sh 1800 fuzz/target/x86_64-unknown-linux-gnu/release/gguf fuzz/corpus/gguf ...
set -euo pipefail
budget=$1
shift
"$@" &
pid=$!
stopped=0
tick=$(getconf CLK_TCK)
while kill -0 "$pid" 2>/dev/null; do
  # Fields 14 and 15 (utime, stime) follow the command name, which may hold spaces: cut after ')'.
  read -r -a stat < <(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null || true)
  [ ${#stat[@]} -gt 13 ] || break
  used=$(((stat[11] + stat[12]) / tick))
  if [ "$used" -ge "$budget" ]; then
    echo "cpu_budget: $used s of CPU used, stopping $pid" >&2
    kill -INT "$pid"
    stopped=1
    # A background job of a script may ignore SIGINT: follow up with SIGTERM (libFuzzer handles both).
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null && sleep 1; done
    kill -TERM "$pid" 2>/dev/null || true
    break
  fi
  sleep 5
done
rc=0
wait "$pid" || rc=$?
# libFuzzer exits 72 on an interrupt; a shell dies of SIGTERM (143).
if [ "$stopped" = 1 ] && { [ "$rc" = 72 ] || [ "$rc" = 143 ]; }; then rc=0; fi
exit "$rc"
