//! `klog recover` keeps what the batches say, whatever lies beside them: an offset gap between intact
//! segments (a compacted or mirrored topic) is not data loss to cut, and the leader epochs come from the
//! batches, not from which segment's indexes happened to be missing.

mod common;

use std::path::Path;

use common::{klog, scratch_dir, stderr, stdout};
use klog::log::format::{BatchBuilder, Compression};
use serde_json::Value;

/// A follower batch of three records at `base`, in leader epoch `epoch`.
fn follower_batch(base: i64, epoch: i32, out: &mut Vec<u8>) {
    let mut b = BatchBuilder::new(Compression::None)
        .base_offset(base)
        .partition_leader_epoch(epoch);
    for i in 0..3 {
        b.append(
            1_700_000_000_000,
            Some(b"k"),
            Some(format!("value {base} {i}").as_bytes()),
            &[],
        )
        .unwrap();
    }
    b.build_into(out).unwrap();
}

/// `klog append --as follower` of the batches at `bases` into `root/name`, two batches a segment.
fn append_follower(root: &Path, name: &str, batches: &[(i64, i32)]) {
    let mut input = Vec::new();
    for &(base, epoch) in batches {
        follower_batch(base, epoch, &mut input);
    }
    let file = root.join(format!("{name}.bin"));
    std::fs::write(&file, input).unwrap();
    let dir = root.join(name);
    let out = klog(&[
        "append",
        dir.to_str().unwrap(),
        file.to_str().unwrap(),
        "--as",
        "follower",
        "--config",
        "segment.bytes=300",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// The directory as a crash before the first checkpoint leaves it: no clean-shutdown marker, no
/// recovery point (every segment is rescanned).
fn make_unclean(root: &Path) {
    for f in [".kafka_cleanshutdown", "recovery-point-offset-checkpoint"] {
        let _ = std::fs::remove_file(root.join(f));
    }
}

fn recover(root: &Path) -> Value {
    let out = klog(&["recover", root.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    serde_json::from_str(stdout(&out).lines().next().unwrap()).unwrap()
}

#[test]
fn recover_keeps_the_segment_after_an_offset_gap() {
    let root = scratch_dir("recover-gap").join("logs");
    std::fs::create_dir_all(&root).unwrap();
    append_follower(&root, "g-0", &[(0, 0), (3, 0), (1006, 0), (1009, 0)]);
    let later = root.join("g-0/00000000000000001006.log");
    let bytes = std::fs::read(&later).expect("the batch at 1006 rolled a segment");
    make_unclean(&root);
    let report = recover(&root);
    assert!(
        report["segments_scanned"].as_u64().unwrap() >= 2,
        "{report}"
    );
    assert_eq!(report["truncated"], serde_json::json!([]), "{report}");
    assert_eq!(report["log_end_offset"], 1012, "{report}");
    assert_eq!(std::fs::read(&later).unwrap(), bytes, "segment 1006 kept");
    let out = klog(&["verify", root.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stdout(&out));
}

#[test]
fn recover_derives_the_leader_epochs_from_the_batches_beside_a_missing_index() {
    let root = scratch_dir("recover-epochs").join("logs");
    std::fs::create_dir_all(&root).unwrap();
    let batches: Vec<(i64, i32)> = (0..8).map(|i| (i * 3, 0)).collect();
    append_follower(&root, "e-0", &batches);
    let dir = root.join("e-0");
    let mut logs: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".log"))
        .collect();
    logs.sort();
    assert!(logs.len() >= 3, "{logs:?}");
    // What a recovery interrupted while rebuilding a later segment's indexes (ENOSPC, SIGKILL) leaves:
    // the old index files removed, the new ones not yet there; and no epoch cache, which is derived
    // and may be deleted.
    let later = logs[logs.len() - 2].trim_end_matches(".log").to_owned();
    for ext in ["index", "timeindex"] {
        std::fs::remove_file(dir.join(format!("{later}.{ext}"))).unwrap();
    }
    std::fs::remove_file(dir.join("leader-epoch-checkpoint")).unwrap();
    make_unclean(&root);
    let report = recover(&root);
    assert_eq!(report["log_end_offset"], 24, "{report}");
    assert_eq!(
        std::fs::read_to_string(dir.join("leader-epoch-checkpoint")).unwrap(),
        "0\n1\n0 0\n",
        "every batch is in epoch 0, from offset 0 ({report})"
    );
    let out = klog(&["verify", root.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stdout(&out));
}
