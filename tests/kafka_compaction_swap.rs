//! Kafka's swap files finished by klog's recovery: a real Kafka 4.4.0 broker is killed (SIGKILL) in the middle
//! of its cleaner's segment swap, at an exact rename, by a small `LD_PRELOAD` shim built here with `cc` that
//! interposes `rename`/`renameat`/`renameat2`. `klog recover` then loads the partition as Kafka's `LogLoader`
//! would: no `.cleaned` or `.swap` file is left, every record it serves is the pre-clean record at that
//! offset, every record a finished pass keeps is there, and a kill before the first swap completes serves
//! exactly the pre-clean records.
//!
//! Skips with one line without Java, unless `KLOG_REQUIRE_KAFKA=1` (CI), where it fails.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::compaction::{CompactedTopic, PARTITION};
use common::kafka::{copy_dir, kafka_available};
use common::{klog, sorted_entries, stderr, stdout};
use serde_json::Value;

/// The shim: SIGKILL right after the Nth rename (KLOG_KILL_RENAME_NTH) inside a `compacted-0` directory
/// whose target ends in `.swap` or `.deleted`, or (pattern `final`) whose source ends in `.swap`.
const SHIM: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
static int seen;
static int ends(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}
static void after(const char *from, const char *to, int rc) {
    const char *pattern = getenv("KLOG_KILL_RENAME_PATTERN"), *nth = getenv("KLOG_KILL_RENAME_NTH");
    if (rc != 0 || !pattern || !nth || !from || !to || !strstr(to, "compacted-0/")) return;
    int match = strcmp(pattern, "final") == 0 ? ends(from, ".swap") && !ends(to, ".swap") : ends(to, pattern);
    if (match && ++seen == atoi(nth)) raise(SIGKILL);
}
int rename(const char *from, const char *to) {
    int (*real)(const char *, const char *) = dlsym(RTLD_NEXT, "rename");
    int rc = real(from, to);
    after(from, to, rc);
    return rc;
}
int renameat(int fd1, const char *from, int fd2, const char *to) {
    int (*real)(int, const char *, int, const char *) = dlsym(RTLD_NEXT, "renameat");
    int rc = real(fd1, from, fd2, to);
    after(from, to, rc);
    return rc;
}
int renameat2(int fd1, const char *from, int fd2, const char *to, unsigned flags) {
    int (*real)(int, const char *, int, const char *, unsigned) = dlsym(RTLD_NEXT, "renameat2");
    int rc = real(fd1, from, fd2, to, flags);
    after(from, to, rc);
    return rc;
}
"#;

fn build_shim(dir: &Path) -> PathBuf {
    let source = dir.join("kill_rename.c");
    let library = dir.join("kill_rename.so");
    std::fs::write(&source, SHIM).expect("write the shim");
    let out = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&library)
        .arg(&source)
        .arg("-ldl")
        .output()
        .expect("cc runs (the shim needs a C compiler)");
    assert!(
        out.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    library
}

/// Every record of the partition's `.log` files as klog dumps them: offset -> (key, value, control).
fn records(partition: &Path) -> BTreeMap<i64, Value> {
    let mut all = BTreeMap::new();
    for file in sorted_entries(partition) {
        if file.extension().and_then(|e| e.to_str()) != Some("log") {
            continue;
        }
        let out = klog(&[
            "dump",
            "--json",
            "--deep",
            "--print-data-log",
            file.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "klog dump {}: {}",
            file.display(),
            stderr(&out)
        );
        for line in stdout(&out).lines() {
            let batch: Value = serde_json::from_str(line).expect("a JSON batch");
            for record in batch["records"].as_array().into_iter().flatten() {
                let key = record["offset"].as_i64().expect("an offset");
                let value =
                    serde_json::json!([record["key"], record["value"], batch["is_control"]]);
                assert!(
                    all.insert(key, value).is_none(),
                    "offset {key} twice in {}",
                    partition.display()
                );
            }
        }
    }
    all
}

#[test]
fn kafka_swap_leftovers_are_finished_by_klog_recovery() {
    if !kafka_available() {
        return;
    }
    let (topic, broker) = CompactedTopic::create("kafka-compaction-swap", 120, 30, &[]);
    let (root, cluster) = (&topic.root, &topic.cluster);
    let shim = build_shim(root);
    topic.alter(&broker, &["min.cleanable.dirty.ratio=0.01"]);
    broker.kill(); // before the cleaner's backoff ends; the ratio is in the metadata log
    let base = root.join("base");
    copy_dir(&cluster.data, &base);
    let pre = records(&base.join(PARTITION));

    // A finished pass, the reference of what the broker keeps.
    let broker = cluster.start();
    topic.await_clean(&broker, None);
    broker.stop();
    let post = records(&cluster.data.join(PARTITION));
    assert!(
        post.len() < pre.len(),
        "the finished pass kept {} of {}",
        post.len(),
        pre.len()
    );

    for (pattern, nth) in [(".swap", 1), (".swap", 3), (".deleted", 1), ("final", 1)] {
        std::fs::remove_dir_all(&cluster.data).expect("remove the data");
        copy_dir(&base, &cluster.data);
        let mut broker = cluster.spawn_with_env(&[
            ("LD_PRELOAD", shim.to_str().unwrap()),
            ("KLOG_KILL_RENAME_PATTERN", pattern),
            ("KLOG_KILL_RENAME_NTH", &nth.to_string()),
        ]);
        assert!(
            broker.wait_exit(Duration::from_secs(120)),
            "the shim did not kill the broker at {pattern} #{nth}"
        );
        let killed = root.join(format!("killed{pattern}-{nth}"));
        copy_dir(&cluster.data.join(PARTITION), &killed);
        let out = klog(&["recover", killed.to_str().unwrap(), "--json"]);
        assert!(
            out.status.success(),
            "klog recover at {pattern} #{nth}: {}",
            stderr(&out)
        );
        for file in sorted_entries(&killed) {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                !name.ends_with(".swap") && !name.ends_with(".cleaned"),
                "{name} left after klog recovered the kill at {pattern} #{nth}"
            );
        }
        let served = records(&killed);
        for (offset, record) in &served {
            assert_eq!(
                pre.get(offset),
                Some(record),
                "offset {offset} after the kill at {pattern} #{nth}"
            );
        }
        for offset in post.keys() {
            assert!(
                served.contains_key(offset),
                "offset {offset} lost after the kill at {pattern} #{nth}"
            );
        }
        if (pattern, nth) == (".swap", 1) {
            assert_eq!(
                served, pre,
                "a kill before the swap completed serves the pre-clean records"
            );
        } else {
            assert!(
                served.len() < pre.len(),
                "the kill at {pattern} #{nth} came after the swap: some records go"
            );
        }
    }
}
