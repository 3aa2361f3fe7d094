#!/usr/bin/env bash
# bench/wrk.sh — requests/s of the gateway and of a bare httputil.ReverseProxy
# side by side, in the same run, on one loopback backend answering 64 bytes.
# The gateway writes its one JSON log line per request (to /dev/null).
# Usage: bench/wrk.sh (or make bench-wrk). Environment: ROUNDS (2), DURATION
# (10s), THREADS (2), CONNS (32), BARE_PROCESS (shared: the bare proxy runs in
# the backend's process, as the throughput target was measured; own: in a
# process of its own, as the gateway does), GATEWAY_GOGC (unset: the
# gateway's own default; set: GOGC for the gateway process alone),
# LOAD_BALANCE (unset: the gateway's default; else its LoadBalanceMode) and
# HOST_COPIES (1: Hosts lists the backend this many times, so a balancing
# mode has hosts to order). Prints, per round, the gateway's CPU time
# (user + system, /proc/PID/stat) per request it served: on a shared
# machine a steadier figure than requests/s, which other processes'
# load moves. Prints the gateway's peak resident memory (VmHWM) at the
# end. Needs wrk (make bench-wrk installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-2} DURATION=${DURATION:-10s} THREADS=${THREADS:-2} CONNS=${CONNS:-32} BARE_PROCESS=${BARE_PROCESS:-shared}
LOAD_BALANCE=${LOAD_BALANCE:-} HOST_COPIES=${HOST_COPIES:-1}
command -v wrk >/dev/null || { echo "bench/wrk.sh: wrk not found; make bench-wrk installs it" >&2; exit 1; }
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

go build -o "$tmp/gateway" ./functions
go build -o "$tmp/wrkpeers" ./bench/wrkpeers
"$tmp/wrkpeers" >"$tmp/peers" &
pids+=($!)
for _ in $(seq 100); do [ -s "$tmp/peers" ] && break; sleep 0.1; done
read -r backend bare gw <"$tmp/peers"
backend=${backend#backend=} bare=${bare#bare=} gw=${gw#gateway=}
case $BARE_PROCESS in
shared) ;;
own)
	"$tmp/wrkpeers" -proxy "$backend" >"$tmp/bare" &
	pids+=($!)
	for _ in $(seq 100); do [ -s "$tmp/bare" ] && break; sleep 0.1; done
	read -r bare <"$tmp/bare"
	bare=${bare#bare=}
	;;
*) echo "bench/wrk.sh: BARE_PROCESS=$BARE_PROCESS; want shared or own" >&2; exit 2 ;;
esac
hosts=$backend
for _ in $(seq 2 "$HOST_COPIES"); do hosts=$hosts,$backend; done
env ${GATEWAY_GOGC:+GOGC=$GATEWAY_GOGC} ${LOAD_BALANCE:+LoadBalanceMode=$LOAD_BALANCE} Hosts=$hosts ListenAddr=$gw AsyncStore="file:$tmp/store" "$tmp/gateway" >/dev/null 2>"$tmp/gateway.err" &
gwpid=$!
pids+=($gwpid)
for _ in $(seq 100); do curl -fs "http://$gw/_gateway/health" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fs "http://$gw/_gateway/health" >/dev/null || { echo "the gateway did not start:"; cat "$tmp/gateway.err"; exit 1; } >&2

rps() { wrk -t"$THREADS" -c"$CONNS" -d"$1" "$2" | awk '/^Requests\/sec/ {print $2}'; }
ticks() { awk '{print $14 + $15}' "/proc/$gwpid/stat"; } # utime + stime, in clock ticks (proc(5))
# gwrps runs wrk on the gateway; sets g (requests/s) and us (its CPU µs a request).
gwrps() {
	local t0 t1 out
	t0=$(ticks)
	out=$(wrk -t"$THREADS" -c"$CONNS" -d"$1" "$2")
	t1=$(ticks)
	g=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
	us=$(awk -v t="$((t1 - t0))" -v hz="$(getconf CLK_TCK)" '/ requests in / {printf "%.1f", t / hz * 1e6 / $1}' <<<"$out")
}
where="the backend's process"
[ "$BARE_PROCESS" = own ] && where="a process of its own"
echo "wrk -t$THREADS -c$CONNS -d$DURATION, 64-byte answers, bare proxy in $where, gateway LoadBalanceMode=${LOAD_BALANCE:-default} over $HOST_COPIES host(s); $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
rps 2s "$bare/warm" >/dev/null
rps 2s "http://$gw/warm" >/dev/null
printf '%-6s %12s %12s %8s %16s\n' round bare gateway ratio 'gateway us/req'
g= us=
for r in $(seq "$ROUNDS"); do
	if ((r % 2)); then # alternate the order, so neither always runs second
		b=$(rps "$DURATION" "$bare/item")
		gwrps "$DURATION" "http://$gw/item"
	else
		gwrps "$DURATION" "http://$gw/item"
		b=$(rps "$DURATION" "$bare/item")
	fi
	printf '%-6s %12s %12s %8s %16s\n' "$r" "$b" "$g" "$(awk -v g="$g" -v b="$b" 'BEGIN {printf "%.2fx", g/b}')" "$us"
done
echo "gateway GOGC=${GATEWAY_GOGC:-default} peak RSS: $(awk '/^VmHWM:/ {printf "%d MiB", $2/1024}' /proc/$gwpid/status)"
