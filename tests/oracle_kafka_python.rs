//! kafka-python as an independent oracle for the batch format, in both directions:
//! bytes kafka-python builds decode in klog to exactly what kafka-python says they hold, and bytes klog
//! builds decode in kafka-python to exactly what klog says they hold. Every codec, legacy v0/v1 included.
//!
//! Needs the venv of `scripts/setup-python.sh`. Skips with one line when it is missing, unless
//! `KLOG_REQUIRE_ORACLE=1` (CI), where a missing oracle fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{klog, klog_built_batches, repo_path, required, scratch_dir, stdout};
use serde_json::Value;

fn oracle() -> Option<PathBuf> {
    let py = common::oracle_python();
    if py.is_none() {
        assert!(
            !required("KLOG_REQUIRE_ORACLE"),
            "KLOG_REQUIRE_ORACLE=1 but the kafka-python venv is missing: run scripts/setup-python.sh"
        );
        common::skip("kafka-python oracle not installed (run scripts/setup-python.sh)");
    }
    py
}

fn run_oracle(py: &Path, args: &[&str]) -> std::process::Output {
    Command::new(py)
        .arg(repo_path("tests/oracle/oracle.py"))
        .args(args)
        .output()
        .expect("the oracle runs")
}

fn dump_lines(path: &Path) -> Vec<Value> {
    let out = klog(&["dump", "--json", "--deep", path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "klog dump {}: {}",
        path.display(),
        common::stderr(&out)
    );
    stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn kafka_python_batches_decode_in_klog_exactly_as_kafka_python_reads_them() {
    let Some(py) = oracle() else { return };
    let dir = scratch_dir("oracle-built");
    let out = run_oracle(&py, &["build", dir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "oracle build: {}",
        common::stderr(&out)
    );
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let files = manifest["files"].as_array().unwrap();
    assert!(
        files.len() >= 30,
        "the oracle builds every codec, legacy and control cases"
    );
    let mut magics = std::collections::BTreeSet::new();
    let mut codecs = std::collections::BTreeSet::new();
    for f in files {
        let name = f["file"].as_str().unwrap();
        let expected = f["expected_lines"].as_array().unwrap();
        let ours = dump_lines(&dir.join(name));
        assert_eq!(ours.len(), expected.len(), "{name}: batch count");
        for (i, (o, e)) in ours.iter().zip(expected).enumerate() {
            assert_eq!(o, e, "{name}: batch {i} differs from kafka-python");
            magics.insert(o["magic"].as_i64().unwrap());
            codecs.insert(o["compression"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(magics.into_iter().collect::<Vec<_>>(), vec![0, 1, 2]);
    assert_eq!(codecs.len(), 5, "every codec was exercised: {codecs:?}");
}

#[test]
fn klog_batches_decode_in_kafka_python_exactly_as_klog_reads_them() {
    let Some(py) = oracle() else { return };
    let dir = scratch_dir("oracle-klog-built");
    let (bytes, count) = klog_built_batches();
    let file = dir.join("klog-built.bin");
    std::fs::write(&file, bytes).unwrap();
    let ours = dump_lines(&file);
    assert_eq!(ours.len(), count);
    assert_eq!(ours.last().unwrap()["control_type"], "mirror_pid_reset");
    let jsonl = dir.join("klog-built.jsonl");
    std::fs::write(
        &jsonl,
        stdout(&klog(&["dump", "--json", "--deep", file.to_str().unwrap()])),
    )
    .unwrap();
    let out = run_oracle(
        &py,
        &[
            "encode-check",
            file.to_str().unwrap(),
            jsonl.to_str().unwrap(),
        ],
    );
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kafka-python disagrees:\n{report}\n{}",
        common::stderr(&out)
    );
    assert!(
        report.contains(&format!("OK: {count} batch(es)")),
        "{report}"
    );
}
