#!/usr/bin/env bash
# Regenerates the repository's fixtures/ with a real Apache Kafka broker (the jars interop/pom.xml pins) and
# the Java workload (interop/workload): see fixtures/README.md. Needs Java 17+, Maven and Maven Central.
# A regeneration changes producer ids, timestamps and CRCs; the tests read those from fixtures/manifest.json.
#
#   scripts/make-fixtures.sh            # rewrite fixtures/ (keeps fixtures/README.md)
#   KLOG_FIXTURES_OUT=/tmp/f scripts/make-fixtures.sh   # write elsewhere
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
readme="$(mktemp)"
trap 'rm -f "$readme"' EXIT
if [ -f fixtures/README.md ]; then cp fixtures/README.md "$readme"; fi
interop/kafka-tools.sh workload-build >/dev/null
cargo test --test make_fixtures
out="${KLOG_FIXTURES_OUT:-fixtures}"
if [ -s "$readme" ]; then cp "$readme" "$out/README.md"; fi
du -sh "$out"
