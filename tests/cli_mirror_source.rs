//! `klog mirror` and where a local source lives (issue 13, defects 10 and 11): a relative `--source` is
//! stored absolute, so `mirror run` works from any directory; a source that went missing is named as
//! missing; `klog mirror retry` resets a FAILED partition and `describe` says why it failed and when
//! it retries.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{fixtures, scratch_dir, stderr, stdout};
use serde_json::Value;

/// Runs klog in `cwd`.
fn klog_in(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_klog"))
        .current_dir(cwd)
        .args(args)
        .output()
        .expect("the klog binary runs")
}

fn ok_in(cwd: &Path, args: &[&str]) -> String {
    let out = klog_in(cwd, args);
    assert!(
        out.status.success(),
        "klog {args:?} in {} failed: {}{}",
        cwd.display(),
        stdout(&out),
        stderr(&out)
    );
    stdout(&out)
}

fn describe(cwd: &Path, root: &Path) -> Value {
    let out = ok_in(
        cwd,
        &["mirror", "describe", root.to_str().unwrap(), "--json"],
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    v["partitions"][0].clone()
}

/// A (topic t with one fixture batch) and B, in `dir`; B's mirror m is created from `dir` with the
/// relative source `A`.
fn clusters(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (a, b) = (dir.join("A"), dir.join("B"));
    ok_in(dir, &["cluster", "init", "A"]);
    ok_in(dir, &["cluster", "init", "B"]);
    ok_in(dir, &["topic", "create", "A", "t"]);
    let batch = fixtures().join("batches/idempotent-none.bin");
    ok_in(dir, &["append", "A/t-0", batch.to_str().unwrap()]);
    ok_in(dir, &["mirror", "create", "B", "m", "--source", "A"]);
    (a, b)
}

#[test]
fn a_relative_source_is_stored_absolute_and_works_from_anywhere() {
    let dir = scratch_dir("cli_mirror_relative_source");
    let (a, b) = clusters(&dir);
    let meta: Value =
        serde_json::from_slice(&std::fs::read(b.join("cluster.json")).unwrap()).unwrap();
    let stored = meta["mirrors"]["m"]["source"].as_str().unwrap().to_owned();
    assert_eq!(
        Path::new(&stored),
        a.canonicalize().unwrap(),
        "the source is stored as its absolute path"
    );
    // From another working directory, with B named absolutely.
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let b_s = b.to_str().unwrap();
    ok_in(&elsewhere, &["mirror", "add", b_s, "m", "t"]);
    ok_in(&elsewhere, &["mirror", "run", b_s, "--until-idle"]);
    let d = describe(&elsewhere, &b);
    assert_eq!(d["state"], "MIRRORING", "{d}");
    let source_end = describe(&elsewhere, &a)["log_end_offset"].clone();
    assert!(source_end.as_i64().unwrap() > 0);
    assert_eq!(d["log_end_offset"], source_end);
}

#[test]
fn a_missing_source_is_named_missing_and_retry_resets_the_partition() {
    let dir = scratch_dir("cli_mirror_missing_source");
    let (a, b) = clusters(&dir);
    let b_s = b.to_str().unwrap();
    ok_in(&dir, &["mirror", "add", b_s, "m", "t"]);
    ok_in(&dir, &["mirror", "run", b_s, "--until-idle"]);
    // The source goes away (unmounted, moved).
    let moved = dir.join("A.moved");
    std::fs::rename(&a, &moved).unwrap();
    let out = klog_in(&dir, &["mirror", "run", b_s, "--until-idle", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let errors: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["event"] == "error")
        .collect();
    assert!(!errors.is_empty(), "{}", stdout(&out));
    let message = errors[0]["message"].as_str().unwrap();
    assert!(message.contains("missing"), "{message}");
    assert!(
        message.contains(a.canonicalize().unwrap_or(a.clone()).to_str().unwrap())
            || message.contains(a.to_str().unwrap()),
        "{message}"
    );
    assert!(!message.contains("cluster init"), "{message}");
    let d = describe(&dir, &b);
    assert_eq!(d["state"], "FAILED", "{d}");
    assert_eq!(d["failed_state"], "MIRRORING", "{d}");
    assert_eq!(d["retry_attempt"], 1, "{d}");
    assert!(d["next_retry_ms"].as_i64().unwrap() > 0, "{d}");
    assert!(d["error"].as_str().unwrap().contains("missing"), "{d}");
    // The text table says why and when.
    let text = ok_in(&dir, &["mirror", "describe", b_s]);
    assert!(text.contains("FAILED in MIRRORING"), "{text}");
    assert!(text.contains("retry"), "{text}");
    // Back again; `klog mirror retry` resets the partition and the next run mirrors at once.
    std::fs::rename(&moved, &a).unwrap();
    let out = ok_in(&dir, &["mirror", "retry", b_s, "m", "--json"]);
    let line: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(line["topic"], "t");
    assert_eq!(line["error"], Value::Null);
    assert_eq!(line["partitions"], serde_json::json!([0]));
    let d = describe(&dir, &b);
    assert_eq!(
        (d["state"].clone(), d["retry_attempt"].clone()),
        ("FAILED".into(), 0.into())
    );
    ok_in(&dir, &["mirror", "run", b_s, "--until-idle"]);
    assert_eq!(describe(&dir, &b)["state"], "MIRRORING");
    // Unknown mirror: the whole request fails with Kafka's name.
    let out = klog_in(&dir, &["mirror", "retry", b_s, "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("UNKNOWN_MIRROR"), "{}", stderr(&out));
}

/// The library stores a relative local source absolute too (resolved from the working directory of
/// the call), and keeps a `kafka://` source as given.
#[test]
fn the_library_stores_a_relative_source_absolute() {
    use std::sync::Arc;
    let dir = scratch_dir("lib_mirror_relative_source");
    let c = klog::mirror::Cluster::init(
        Arc::new(klog::log::io::StdStorage),
        Arc::new(klog::log::clock::SystemClock),
        &dir.join("B"),
        klog::mirror::ClusterOptions::default(),
    )
    .unwrap();
    c.create_mirror("m", "some/where").unwrap();
    c.create_mirror("k", "kafka://127.0.0.1:9092").unwrap();
    let mirrors = c.mirrors();
    assert_eq!(
        Path::new(&mirrors["m"].source),
        std::env::current_dir().unwrap().join("some/where")
    );
    assert_eq!(mirrors["k"].source, "kafka://127.0.0.1:9092");
    c.close().unwrap();
}

/// A relative source stored by an older klog is resolved from the working directory; when nothing is
/// there the error says so and how to fix it.
#[test]
fn an_old_relative_source_that_is_not_found_says_it_is_relative() {
    let dir = scratch_dir("cli_mirror_old_relative_source");
    let (a, b) = clusters(&dir);
    let b_s = b.to_str().unwrap();
    ok_in(&dir, &["mirror", "add", b_s, "m", "t"]);
    let path = b.join("cluster.json");
    let meta = std::fs::read_to_string(&path).unwrap();
    let canonical = a.canonicalize().unwrap();
    let old = meta.replace(
        &format!("\"source\": \"{}\"", canonical.to_str().unwrap()),
        "\"source\": \"A\"",
    );
    assert_ne!(meta, old, "{meta}");
    std::fs::write(&path, old).unwrap();
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let out = klog_in(&elsewhere, &["mirror", "run", b_s, "--until-idle"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("A: the source cluster is missing"), "{err}");
    assert!(err.contains("relative path"), "{err}");
    assert!(!err.contains("cluster init"), "{err}");
    // From the directory it is relative to, it works.
    ok_in(&dir, &["mirror", "retry", b_s, "m"]);
    ok_in(&dir, &["mirror", "run", b_s, "--until-idle"]);
    assert_eq!(describe(&dir, &b)["state"], "MIRRORING");
}
