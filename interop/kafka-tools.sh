#!/usr/bin/env bash
# Run real Apache Kafka tools (JVM) against klog's files, with Kafka's jars taken from Maven
# Central through interop/pom.xml. No Kafka tarball, no network other than Maven Central.
#
#   interop/kafka-tools.sh version               pinned Kafka version
#   interop/kafka-tools.sh setup                 resolve + cache the classpath (call up front in CI)
#   interop/kafka-tools.sh classpath             print the runtime classpath (resolving if needed)
#   interop/kafka-tools.sh dump-log ARGS...      DumpLogSegments, same args as kafka-dump-log.sh
#   interop/kafka-tools.sh storage-tool ARGS...  kafka.tools.StorageTool, same as kafka-storage.sh
#   interop/kafka-tools.sh run MAIN-CLASS ARGS... any main class on the Kafka classpath
#   interop/kafka-tools.sh workload-build        compile interop/workload (cached); prints the jar's path
#   interop/kafka-tools.sh workload ARGS...      run dev.klog.interop.Workload (built on first use)
#
# stdout carries only the tool's output; Maven output, log4j and JVM warnings go to stderr.
# The tool's exit status is this script's exit status.
#
# Environment:
#   KLOG_KAFKA_CACHE      cache dir for classpath files (default $HOME/.cache/klog)
#   KLOG_KAFKA_VERSION    override the pinned version (e.g. 4.2.2), for comparing releases
#   KLOG_MVN              maven command (default mvn); KLOG_MVN_OPTS extra Maven args (e.g. -o)
#   JAVA_HOME / KLOG_JAVA java to use (default $JAVA_HOME/bin/java, else java on PATH)
#   KLOG_KAFKA_HEAP_OPTS  heap options (default -Xmx256M, like kafka-run-class.sh for tools)
#   KLOG_KAFKA_JAVA_OPTS  extra JVM options (appended last, so they win)
#   KLOG_KAFKA_LOG_LEVEL  root log level for log4j2 (default WARN; output always on stderr)
set -euo pipefail

INTEROP_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
POM="$INTEROP_DIR/pom.xml"
LOG4J2_CONFIG="$INTEROP_DIR/log4j2.xml"
CACHE_DIR="${KLOG_KAFKA_CACHE:-$HOME/.cache/klog}"

die() { echo "kafka-tools.sh: $*" >&2; exit 2; }

pinned_version() {
    local v
    v="$(sed -n 's:.*<kafka\.version>\([^<]*\)</kafka\.version>.*:\1:p' "$POM" | head -n1)"
    [[ -n "$v" ]] || die "cannot read <kafka.version> from $POM"
    printf '%s\n' "$v"
}

KAFKA_VERSION="${KLOG_KAFKA_VERSION:-$(pinned_version)}"
CP_FILE="$CACHE_DIR/kafka-$KAFKA_VERSION.classpath"
KEY_FILE="$CP_FILE.key"

# Whatever the classpath depends on: the pom, the version, and extra Maven options.
cache_key() {
    {
        cat "$POM"
        printf 'version=%s\nmvn_opts=%s\n' "$KAFKA_VERSION" "${KLOG_MVN_OPTS:-}"
    } | sha256sum | cut -d' ' -f1
}

classpath_is_fresh() {
    [[ -s "$CP_FILE" && -f "$KEY_FILE" ]] || return 1
    [[ "$(cat "$KEY_FILE")" == "$(cache_key)" ]] || return 1
    # Every jar must still exist (the Maven local repo may have been wiped).
    local jar
    local -a jars
    IFS=":" read -r -a jars < "$CP_FILE" || true   # no trailing newline
    for jar in "${jars[@]}"; do
        [[ -f "$jar" ]] || return 1
    done
}

resolve() {
    mkdir -p "$CACHE_DIR"
    local tmp log rc=0
    tmp="$(mktemp "$CACHE_DIR/.kafka-$KAFKA_VERSION.classpath.XXXXXX")"
    log="$tmp.mvn.log"
    echo "kafka-tools.sh: resolving Apache Kafka $KAFKA_VERSION from Maven Central (first use only)..." >&2
    # shellcheck disable=SC2086 # KLOG_MVN_OPTS is a list of words on purpose
    ${KLOG_MVN:-mvn} -B -q -Dstyle.color=never -f "$POM" ${KLOG_MVN_OPTS:-} \
        "-Dkafka.version=$KAFKA_VERSION" \
        dependency:build-classpath "-Dmdep.outputFile=$tmp" -Dmdep.includeScope=runtime \
        > "$log" 2>&1 || rc=$?
    if [[ $rc -ne 0 || ! -s "$tmp" ]]; then
        sed 's/\x1b\[[0-9;]*m//g' "$log" >&2   # Maven 3.8 -q leaves stray colour resets
        rm -f "$tmp" "$log"
        echo "kafka-tools.sh: Maven failed to resolve Kafka $KAFKA_VERSION (exit $rc)" >&2
        exit $(( rc == 0 ? 1 : rc ))
    fi
    rm -f "$log"
    chmod 644 "$tmp"
    mv -f "$tmp" "$CP_FILE"          # atomic: concurrent callers never see a partial file
    cache_key > "$KEY_FILE.tmp.$$" && mv -f "$KEY_FILE.tmp.$$" "$KEY_FILE"
}

ensure_classpath() {
    classpath_is_fresh || resolve
}

java_bin() {
    if [[ -n "${KLOG_JAVA:-}" ]]; then printf '%s\n' "$KLOG_JAVA"
    elif [[ -n "${JAVA_HOME:-}" ]]; then printf '%s\n' "$JAVA_HOME/bin/java"
    else printf '%s\n' java
    fi
}

# run_java MAIN-CLASS ARGS... : exec's the JVM, so its exit status is ours.
run_java() {
    local main="$1"; shift
    ensure_classpath
    local -a heap extra
    # shellcheck disable=SC2206 # word splitting of option strings is intended
    heap=(${KLOG_KAFKA_HEAP_OPTS:--Xmx256M})
    # shellcheck disable=SC2206
    extra=(${KLOG_KAFKA_JAVA_OPTS:-})
    exec "$(java_bin)" \
        "${heap[@]}" \
        -XX:+DisplayVMOutputToStderr \
        -Djava.awt.headless=true \
        "-Dlog4j2.configurationFile=$LOG4J2_CONFIG" \
        "-Dklog.kafka.log.level=${KLOG_KAFKA_LOG_LEVEL:-WARN}" \
        "${extra[@]}" \
        -cp "${KLOG_KAFKA_EXTRA_CP:+$KLOG_KAFKA_EXTRA_CP:}$(cat "$CP_FILE")" \
        "$main" "$@"
}

# DumpLogSegments moved from core (Scala, kafka.tools) to the tools module (Java,
# org.apache.kafka.tools) in Kafka 4.3.0. 4.0.x-4.2.x only have the core one.
dump_log_class() {
    local major minor
    IFS=. read -r major minor _ <<< "$KAFKA_VERSION"
    if (( major > 4 || (major == 4 && minor >= 3) )); then
        echo org.apache.kafka.tools.DumpLogSegments
    else
        echo kafka.tools.DumpLogSegments
    fi
}

WORKLOAD_DIR="$INTEROP_DIR/workload"
WORKLOAD_JAR="$WORKLOAD_DIR/target/klog-workload.jar"

# Whatever the workload jar depends on: its pom and sources, and extra Maven options.
workload_key() {
    {
        find "$WORKLOAD_DIR/pom.xml" "$WORKLOAD_DIR/src" -type f -print0 | sort -z | xargs -0 cat
        printf 'mvn_opts=%s\n' "${KLOG_MVN_OPTS:-}"
    } | sha256sum | cut -d' ' -f1
}

# Compiles the workload with Maven unless the jar matches the sources. One build at a time (tests run
# in parallel): the lock is held while checking and building.
workload_build() {
    mkdir -p "$WORKLOAD_DIR/target"
    local stamp="$WORKLOAD_DIR/target/.klog-key" key log rc=0
    exec 9>"$WORKLOAD_DIR/target/.lock"
    flock 9
    key="$(workload_key)"
    if [[ ! -f "$WORKLOAD_JAR" || ! -f "$stamp" || "$(cat "$stamp")" != "$key" ]]; then
        echo "kafka-tools.sh: compiling interop/workload with Maven..." >&2
        log="$WORKLOAD_DIR/target/mvn.log"
        # shellcheck disable=SC2086 # KLOG_MVN_OPTS is a list of words on purpose
        ${KLOG_MVN:-mvn} -B -q -Dstyle.color=never -f "$WORKLOAD_DIR/pom.xml" ${KLOG_MVN_OPTS:-} \
            package > "$log" 2>&1 || rc=$?
        if [[ $rc -ne 0 || ! -f "$WORKLOAD_JAR" ]]; then
            sed 's/\x1b\[[0-9;]*m//g' "$log" >&2
            echo "kafka-tools.sh: Maven failed to build interop/workload (exit $rc)" >&2
            exit $(( rc == 0 ? 1 : rc ))
        fi
        printf '%s\n' "$key" > "$stamp"
    fi
    exec 9>&-
}

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
}

cmd="${1:-help}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
    version)      echo "$KAFKA_VERSION" ;;
    setup)        ensure_classpath ;;
    classpath)    ensure_classpath; cat "$CP_FILE"; echo ;;
    dump-log)     run_java "$(dump_log_class)" "$@" ;;
    storage-tool) run_java kafka.tools.StorageTool "$@" ;;
    workload-build) ensure_classpath; workload_build; echo "$WORKLOAD_JAR" ;;
    workload)     ensure_classpath; workload_build
                  KLOG_KAFKA_EXTRA_CP="$WORKLOAD_JAR" run_java dev.klog.interop.Workload "$@" ;;
    run)          [[ $# -ge 1 ]] || die "usage: kafka-tools.sh run MAIN-CLASS [ARGS...]"
                  run_java "$@" ;;
    help|-h|--help) usage ;;
    *)            usage >&2; die "unknown command: $cmd" ;;
esac
