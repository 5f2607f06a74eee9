#!/usr/bin/env bash
# Bounded libFuzzer runs of every fuzz target in fuzz/, one target at a time.
#
#   scripts/fuzz.sh                      -> every target, 60 s each
#   scripts/fuzz.sh 300                  -> every target, 300 s each
#   scripts/fuzz.sh 120 records legacy   -> only these targets
#
# Each target starts from fuzz/seeds/<target>/ (and fuzz/regressions/<target>/ when present); what the
# fuzzer finds goes to fuzz/corpus/<target>/, crashes to fuzz/artifacts/<target>/ (both gitignored), the full
# libFuzzer log to fuzz/target/fuzz-logs/<target>.log. Prints the executions each target reached and exits
# non-zero if any target crashed (a panic, an invariant broken, a timeout of 10 s or an OOM at 2 GiB).
#
# Environment:
#   KLOG_FUZZ_KEEP_GOING=1   keep fuzzing after a crash (libFuzzer -fork=1 -ignore_crashes=1 ...), to find
#                            more than the first bug of a target; every crash is still saved and reported.
#   KLOG_FUZZ_ARGS="..."     extra libFuzzer flags, e.g. "-max_len=8192".
#   KLOG_FUZZ_SKIP_REGRESSIONS=1
#                            do not load fuzz/regressions/<target>/ (a reproducer of an unfixed bug crashes
#                            the run at once; skip them to measure how fast fuzzing finds the bug itself).
#
# Needs a nightly toolchain (rustup toolchain install nightly) and cargo-fuzz (cargo install cargo-fuzz).
# Without them, `cargo test --test fuzz_corpus` replays the seeds and mutations of every target on stable.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

seconds="${1:-60}"
shift || true
case "$seconds" in
  '' | *[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]" >&2; exit 2 ;;
esac

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  echo "fuzz.sh: no nightly toolchain: rustup toolchain install nightly" >&2
  exit 2
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz.sh: cargo-fuzz is not installed: cargo install cargo-fuzz" >&2
  exit 2
fi

if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(cargo +nightly fuzz list)
fi

echo "fuzz.sh: building ${#targets[@]} targets (release, debug assertions, AddressSanitizer)" >&2
if ! cargo +nightly fuzz build >&2; then
  echo "fuzz.sh: build failed" >&2
  exit 2
fi

logs="$root/fuzz/target/fuzz-logs"
mkdir -p "$logs"

extra=()
if [ "${KLOG_FUZZ_KEEP_GOING:-0}" = 1 ]; then
  extra+=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
fi
if [ -n "${KLOG_FUZZ_ARGS:-}" ]; then
  # shellcheck disable=SC2206
  extra+=(${KLOG_FUZZ_ARGS})
fi

failed=0
summary=()
for t in "${targets[@]}"; do
  if [ ! -f "fuzz/fuzz_targets/$t.rs" ]; then
    echo "fuzz.sh: no target $t" >&2
    exit 2
  fi
  mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
  dirs=("fuzz/corpus/$t" "fuzz/seeds/$t")
  if [ -d "fuzz/regressions/$t" ] && [ "${KLOG_FUZZ_SKIP_REGRESSIONS:-0}" != 1 ]; then
    dirs+=("fuzz/regressions/$t")
  fi
  log="$logs/$t.log"
  before=$(find "fuzz/artifacts/$t" -type f | sort)
  echo "fuzz.sh: $t for ${seconds}s (log: ${log#"$root"/})" >&2
  start=$(date +%s)
  # The first corpus directory receives new inputs; seeds and regressions are only read.
  cargo +nightly fuzz run "$t" "${dirs[@]}" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    "${extra[@]}" >"$log" 2>&1
  rc=$?
  elapsed=$(( $(date +%s) - start ))

  # Executions: libFuzzer's final stats, else the last "#N" status line (fork mode prints only those).
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{s += $2} END {if (NR) print s}')
  if [ -z "$execs" ]; then
    execs=$(grep -oE '^#[0-9]+' "$log" | tail -n 1 | tr -d '#')
  fi
  execs="${execs:-0}"
  corpus=$(find "fuzz/corpus/$t" -type f | wc -l)
  # New files in the artifact directory: crash-*, timeout-*, oom-*, leak-* (fork mode saves several).
  crashes=$(comm -13 <(printf '%s\n' "$before") <(find "fuzz/artifacts/$t" -type f | sort) | grep . || true)
  ncrash=$(printf '%s' "$crashes" | grep -c . || true)

  if [ "$rc" -ne 0 ] && ! grep -q '^ *Running `' "$log"; then
    # cargo fuzz rebuilds before running: the sources changed since the first build and do not compile.
    status="BUILD FAILED"
    failed=1
    grep -m 5 -E '^error' "$log" | sed 's/^/  /' >&2
  elif [ "$rc" -ne 0 ] || [ "$ncrash" -gt 0 ]; then
    status="CRASH ($ncrash)"
    failed=1
    {
      echo "fuzz.sh: $t crashed (exit $rc); reproducers:"
      printf '  %s\n' $crashes
      grep -E "panicked at|ERROR: AddressSanitizer|ERROR: libFuzzer: (timeout|out-of-memory)" "$log" \
        | sed -E 's/^thread .* panicked at/panicked at/; s/^==[0-9]+== ?//' | sort | uniq -c | sed 's/^/  /'
      echo "  replay: cargo +nightly fuzz run $t <reproducer>"
    } >&2
  else
    status="ok"
  fi
  summary+=("$(printf '%-18s %6ss %14s execs %8s exec/s %6s corpus  %s' \
    "$t" "$elapsed" "$execs" "$(( execs / (elapsed > 0 ? elapsed : 1) ))" "$corpus" "$status")")
done

echo
echo "fuzz.sh: $(date -u +%Y-%m-%dT%H:%MZ), ${seconds}s per target, $(nproc) CPUs"
printf '%s\n' "${summary[@]}"
exit "$failed"
