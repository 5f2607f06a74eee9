//! Shared helpers for the end-to-end tests: the `klog` binary, the fixtures, external tools.
#![allow(dead_code)]

pub mod cleaned;
pub mod compaction;
pub mod failing_rename;
pub mod kafka;
pub mod klog_cleaner;
mod skip;
pub mod tree;

pub use skip::skip;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use klog::log::format::{BatchBuilder, Compression, ControlRecordType, Header};

/// The repository's own fixtures, `fixtures/`: partition directories and single batches a real Kafka broker
/// wrote, made by `scripts/make-fixtures.sh` (see `fixtures/README.md`).
pub fn fixtures() -> PathBuf {
    let dir = repo_path("fixtures");
    assert!(
        dir.join("manifest.json").is_file(),
        "the fixtures are missing at {} (scripts/make-fixtures.sh writes them)",
        dir.display()
    );
    dir
}

/// `fixtures/manifest.json`: what a regeneration of the fixtures may change (producer ids, offsets, CRCs,
/// timestamps, batch and record counts), as Kafka's own dump tool and the Java producers stated it.
pub fn fixture_manifest() -> serde_json::Value {
    let path = fixtures().join("manifest.json");
    let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The manifest's entry for one single-batch file of `fixtures/batches/`.
pub fn fixture_batch(file: &str) -> serde_json::Value {
    let manifest = fixture_manifest();
    let found = manifest["batches"]
        .as_array()
        .expect("the manifest lists batches")
        .iter()
        .find(|b| b["file"] == file)
        .cloned();
    found.unwrap_or_else(|| panic!("fixtures/manifest.json has no batch {file}"))
}

/// `../shared/fixtures` beside the checkout: third-party captures kept outside the repository, an optional
/// extra. None when absent, unless `KLOG_REQUIRE_SHARED_FIXTURES=1` (CI), where their absence fails.
pub fn shared_fixtures() -> Option<PathBuf> {
    let dir = repo_path("../shared/fixtures");
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        !required("KLOG_REQUIRE_SHARED_FIXTURES"),
        "KLOG_REQUIRE_SHARED_FIXTURES=1 but {} is missing",
        dir.display()
    );
    skip(&format!("the shared fixtures: {} is absent", dir.display()));
    None
}

/// Every `.log` segment of the Kafka partition directories under `ROOT/kafka-segments/<copy>/<partition>/`
/// (`ROOT` is `fixtures()` or `shared_fixtures()`), sorted.
pub fn fixture_segments(root: &Path) -> Vec<PathBuf> {
    let mut logs = Vec::new();
    for owner in sorted_entries(&root.join("kafka-segments")) {
        for partition in sorted_entries(&owner) {
            for file in sorted_entries(&partition) {
                if file.extension().is_some_and(|e| e == "log") {
                    logs.push(file);
                }
            }
        }
    }
    logs
}

pub fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .map(|e| e.expect("readable directory entry").path())
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

pub fn klog(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_klog"))
        .args(args)
        .output()
        .expect("the klog binary runs")
}

/// `klog ARGS` that must succeed; its stdout (the failure message shows both streams).
pub fn klog_ok(args: &[&str]) -> String {
    let o = klog(args);
    assert!(
        o.status.success(),
        "klog {args:?} failed: {}{}",
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

/// `n` plain batches of 3 records of `value_bytes` each, timestamps near now (inside Kafka's
/// timestamp bounds), record `j` of batch `i` keyed `key(i, j)`.
pub fn batches_near_now(
    n: usize,
    value_bytes: usize,
    key: impl Fn(usize, usize) -> String,
) -> Vec<u8> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let mut out = Vec::new();
    for i in 0..n {
        let mut b = BatchBuilder::new(Compression::None);
        for j in 0..3 {
            b.append(
                now + j as i64,
                Some(key(i, j).as_bytes()),
                Some(&vec![b'v'; value_bytes]),
                &[],
            )
            .unwrap();
        }
        b.build_into(&mut out).unwrap();
    }
    out
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8 stdout")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fresh scratch directory under the target dir, removed and recreated.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Whether a required external tool's absence must fail the test (CI) rather than skip it (a laptop).
pub fn required(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1")
}

/// Sends `kill -SIGNAL` (`TERM`, `INT`, `STOP`, `CONT`, ...) to a child process.
pub fn signal(child: &std::process::Child, signal: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success(), "kill -{signal} {}", child.id());
}

/// Java on PATH?
pub fn have_java() -> bool {
    Command::new("java")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The oracle's Python (the venv made by `scripts/setup-python.sh`), or None.
pub fn oracle_python() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("KLOG_ORACLE_PYTHON").map(PathBuf::from),
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python")),
    ];
    candidates.into_iter().flatten().find(|p| {
        Command::new(p)
            .args(["-c", "import kafka, crc32c"])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

pub fn repo_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A deterministic spread of batches: every codec x plain/idempotent/transactional, LogAppendTime, sequence
/// wrap, offset gaps, null and empty keys/values/headers, multi-block payloads, and every control batch klog
/// writes (COMMIT, ABORT, MIRROR_PID_RESET).
pub fn klog_built_batches() -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let mut count = 0;
    let mut next_offset = 0i64;
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    // Appends the batch at the next offset; the next batch starts after its last offset.
    let finish = |b: BatchBuilder, out: &mut Vec<u8>, count: &mut usize, next_offset: &mut i64| {
        let start = out.len();
        b.base_offset(*next_offset)
            .partition_leader_epoch(3)
            .build_into(out)
            .unwrap();
        let last_offset_delta = i32::from_be_bytes(out[start + 23..start + 27].try_into().unwrap());
        *next_offset += last_offset_delta as i64 + 1;
        *count += 1;
    };
    for codec in Compression::ALL {
        for kind in 0..5 {
            let mut b = BatchBuilder::new(codec);
            b = match kind {
                0 => b,
                1 => b.producer(7, 2, 40),
                2 => b.producer(8, 0, i32::MAX - 3).transactional(true),
                3 => b.log_append_time(1_700_000_999_999),
                _ => b.producer(9, 1, 0),
            };
            let records = if kind == 4 {
                150
            } else {
                1 + (rand() % 30) as usize
            };
            for i in 0..records {
                let key = format!("key-{}", rand() % 1000);
                let value = format!("{codec}-{kind}-value-{i} ").repeat(1 + (rand() % 40) as usize);
                let headers = [
                    Header {
                        key: "h",
                        value: Some(b"v"),
                    },
                    Header {
                        key: "nul",
                        value: None,
                    },
                    Header {
                        key: "ünï-键",
                        value: Some(b""),
                    },
                ];
                let h = &headers[..(rand() % 4) as usize];
                let key = match rand() % 5 {
                    0 => None,
                    1 => Some(&b""[..]),
                    _ => Some(key.as_bytes()),
                };
                let value = if rand() % 7 == 0 {
                    None
                } else {
                    Some(value.as_bytes())
                };
                let ts = 1_700_000_000_000 + (rand() % 100_000) as i64;
                b.append(ts, key, value, h).unwrap();
            }
            finish(b, &mut out, &mut count, &mut next_offset);
        }
        let mut gaps = BatchBuilder::new(codec);
        for delta in [0, 3, 4, 10] {
            gaps.append_with_offset_delta(
                delta,
                1_700_000_000_000,
                Some(b"k"),
                Some(b"compacted"),
                &[],
            )
            .unwrap();
        }
        finish(gaps, &mut out, &mut count, &mut next_offset);
    }
    for marker in [ControlRecordType::Commit, ControlRecordType::Abort] {
        let b = BatchBuilder::end_txn_marker(marker, 8, 0, 17, 1_700_000_000_500).unwrap();
        finish(b, &mut out, &mut count, &mut next_offset);
    }
    let barrier = BatchBuilder::mirror_pid_reset(1_700_000_000_600).unwrap();
    finish(barrier, &mut out, &mut count, &mut next_offset);
    (out, count)
}
