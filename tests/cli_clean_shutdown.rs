//! The clean-shutdown marker through the binary: a writer's close vouches only for the partition
//! directories it closed cleanly or found clean and never opened (Kafka's `LogManager.shutdown`), so
//! no acknowledged batch is ever cut as a torn write after another tool declared a torn tail clean,
//! and a partition directory `recover` cannot read is an error naming it, never skipped.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{batches_near_now, klog, klog_ok, scratch_dir, stderr, stdout};
use serde_json::Value;

const MARKER: &str = ".kafka_cleanshutdown";

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `<root>/logs/x-0` with three batches (offsets 0..9) appended by `klog append`, then half of one more
/// batch after them and no marker: what a crash during an append leaves. Returns the log directory.
fn torn_x0(root: &Path) -> PathBuf {
    let logs = root.join("logs");
    let input = root.join("three.bin");
    std::fs::write(&input, batches_near_now(3, 10, |i, j| format!("k{i}-{j}"))).unwrap();
    klog_ok(&["append", s(&logs.join("x-0")), s(&input)]);
    std::fs::remove_file(logs.join(MARKER)).unwrap();
    let segment = logs.join("x-0").join("00000000000000000000.log");
    let torn = batches_near_now(1, 10, |_, j| format!("torn-{j}"));
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes.extend_from_slice(&torn[..torn.len() / 2]);
    std::fs::write(&segment, bytes).unwrap();
    logs
}

#[test]
fn cluster_init_over_a_torn_partition_then_topic_create_keeps_every_acknowledged_batch() {
    let root = scratch_dir("cli-clean-shutdown-cluster");
    let logs = torn_x0(&root);
    klog_ok(&["cluster", "init", s(&logs)]);
    klog_ok(&["topic", "create", s(&logs), "x"]);
    let one = root.join("one.bin");
    std::fs::write(&one, batches_near_now(1, 10, |_, j| format!("after-{j}"))).unwrap();
    let out = klog_ok(&["append", s(&logs.join("x-0")), s(&one), "--json"]);
    let appended: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    let base = appended["base_offset"].as_i64().unwrap();
    assert_eq!(base, 9, "the append went after the torn bytes: {out}");
    // Readable at the offset the append reported.
    let read = klog_ok(&["read", s(&logs.join("x-0")), "--offset", "9", "--json"]);
    let read: Value = serde_json::from_str(&read).unwrap();
    let batches = read["batches"].as_array().unwrap();
    assert!(!batches.is_empty(), "offset 9 reads back nothing: {read}");
    assert_eq!(batches[0]["base_offset"], 9, "{read}");
    // And kept by the next unclean recovery.
    std::fs::remove_file(logs.join(MARKER)).unwrap();
    let out = klog(&["recover", s(&logs), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let x0 = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["partition"] == "x-0")
        .unwrap();
    assert_eq!(x0["log_end_offset"], 12, "{x0}");
    assert_eq!(x0["bytes_truncated"], 0, "{x0}");
}

/// Whether this process (not root) is refused a listing of a mode-000 directory.
fn mode_000_blocks_us(dir: &Path) -> bool {
    let probe = dir.join("probe");
    std::fs::create_dir_all(&probe).unwrap();
    std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o000)).unwrap();
    let blocked = std::fs::read_dir(&probe).is_err();
    std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::remove_dir(&probe).unwrap();
    blocked
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `klog ARGS` as the unprivileged user 65534 when this process is root (chmod 000 does not stop root).
fn klog_unprivileged(args: &[&str]) -> Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_klog"))
        .args(args)
        .output()
        .expect("setpriv runs")
}

#[test]
fn recover_of_a_log_dir_with_an_unreadable_partition_fails_naming_it_and_writes_no_marker() {
    let root = scratch_dir("cli-clean-shutdown-unreadable");
    let logs = root.join("logs");
    let input = root.join("two.bin");
    std::fs::write(&input, batches_near_now(2, 10, |i, j| format!("k{i}-{j}"))).unwrap();
    for name in ["x-0", "y-0"] {
        klog_ok(&["append", s(&logs.join(name)), s(&input)]);
    }
    let as_root = is_root();
    if !as_root && !mode_000_blocks_us(&root) {
        common::skip("not root, and a mode-000 directory does not stop this user");
        return;
    }
    for clean in [false, true] {
        if !clean {
            std::fs::remove_file(logs.join(MARKER)).unwrap();
        } else {
            std::fs::write(logs.join(MARKER), "{\"version\":0,\"brokerEpoch\":-1}").unwrap();
        }
        if as_root {
            let owner = Command::new("chown")
                .args(["-R", "65534:65534", s(&root)])
                .status()
                .unwrap();
            assert!(owner.success());
        }
        std::fs::set_permissions(logs.join("x-0"), std::fs::Permissions::from_mode(0o000)).unwrap();
        let run = |args: &[&str]| {
            if as_root {
                klog_unprivileged(args)
            } else {
                klog(args)
            }
        };
        let out = run(&["recover", s(&logs)]);
        // `verify` names it too, and still checks y-0.
        let verified = run(&["verify", s(&logs)]);
        std::fs::set_permissions(logs.join("x-0"), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            out.status.code(),
            Some(1),
            "clean {clean}: {}{}",
            stdout(&out),
            stderr(&out)
        );
        assert!(
            stderr(&out).contains(s(&logs.join("x-0"))),
            "clean {clean}: the error names x-0: {}",
            stderr(&out)
        );
        assert!(
            stdout(&out).contains("y-0"),
            "clean {clean}: y-0 is still recovered: {}",
            stdout(&out)
        );
        assert_eq!(verified.status.code(), Some(1), "{}", stderr(&verified));
        let report = stdout(&verified);
        assert!(
            report.contains(&format!(
                "{}: the partition directory cannot be listed",
                s(&logs.join("x-0"))
            )),
            "{report}"
        );
        assert!(
            report.contains(&format!("{}: ok", s(&logs.join("y-0")))),
            "{report}"
        );
        assert!(
            !logs.join(MARKER).exists(),
            "clean {clean}: the marker vouched for x-0, which recover could not read"
        );
    }
}
