#!/usr/bin/env bash
# Kafka's side of `klog bench`: compiles KafkaBench.java with Maven against the pinned Kafka release
# (once; cached by the hash of its sources) and runs it on Kafka's classpath from ../kafka-tools.sh.
#
#   interop/bench/kafka-bench.sh build          compile (CI setup calls this up front)
#   interop/bench/kafka-bench.sh run ARGS...    run KafkaBench (see its class comment); JSON on stdout
#
# Environment: KLOG_MVN, KLOG_MVN_OPTS, KLOG_JAVA / JAVA_HOME as for kafka-tools.sh;
# KLOG_KAFKA_BENCH_HEAP (default -Xmx2g).
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
TOOLS="$BENCH_DIR/../kafka-tools.sh"
CLASSES="$BENCH_DIR/target/classes"
STAMP="$BENCH_DIR/target/klog-bench.stamp"

die() { echo "kafka-bench.sh: $*" >&2; exit 2; }

source_hash() {
    { cat "$BENCH_DIR/pom.xml"; find "$BENCH_DIR/src" -type f -name '*.java' | sort | xargs cat; } \
        | sha256sum | cut -d' ' -f1
}

build() {
    local pinned ours
    pinned="$("$TOOLS" version)"
    ours="$(sed -n 's:.*<kafka\.version>\([^<]*\)</kafka\.version>.*:\1:p' "$BENCH_DIR/pom.xml" | head -n1)"
    [[ "$pinned" == "$ours" ]] || die "interop/bench/pom.xml builds against Kafka $ours, interop/pom.xml pins $pinned"
    if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$(source_hash)" && -d "$CLASSES" ]]; then
        return 0
    fi
    local log rc=0
    log="$(mktemp)"
    # shellcheck disable=SC2086 # KLOG_MVN_OPTS is a list of words on purpose
    ${KLOG_MVN:-mvn} -B -q -Dstyle.color=never -f "$BENCH_DIR/pom.xml" ${KLOG_MVN_OPTS:-} compile \
        > "$log" 2>&1 || rc=$?
    if [[ $rc -ne 0 ]]; then
        sed 's/\x1b\[[0-9;]*m//g' "$log" >&2
        rm -f "$log"
        die "Maven failed to compile KafkaBench (exit $rc)"
    fi
    rm -f "$log"
    source_hash > "$STAMP"
}

java_bin() {
    if [[ -n "${KLOG_JAVA:-}" ]]; then printf '%s\n' "$KLOG_JAVA"
    elif [[ -n "${JAVA_HOME:-}" ]]; then printf '%s\n' "$JAVA_HOME/bin/java"
    else printf '%s\n' java
    fi
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
    build) "$TOOLS" setup; build ;;
    run)
        build
        cp="$("$TOOLS" classpath)"
        # shellcheck disable=SC2206 # word splitting of option strings is intended
        heap=(${KLOG_KAFKA_BENCH_HEAP:--Xmx2g})
        exec "$(java_bin)" "${heap[@]}" -XX:+DisplayVMOutputToStderr \
            "-Dlog4j2.configurationFile=$BENCH_DIR/../log4j2.xml" -Dklog.kafka.log.level=WARN \
            -cp "$CLASSES:$cp" dev.klog.bench.KafkaBench "$@"
        ;;
    *) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
