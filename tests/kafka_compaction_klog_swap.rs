//! klog's swap leftovers finished by a real Kafka 4.4.0 broker: klog's cleaner pass over a copy of the
//! broker's compacted partition is stopped at each kind of step of its swap (a `Storage` over the real
//! files failing that one rename, `common::failing_rename`): the first and the last `.cleaned -> .swap`
//! of the first group, its first and last old file renamed `.deleted`, its first and last `.swap -> ""`,
//! and the first `.deleted` of the last group (the earlier groups swapped in). Each stopped pass is left
//! in a partition directory of its own of one topic (partition 0 holds the workload's records; the
//! others get a copy of them, with partition 0's checkpoint entries), then one broker starts on the
//! log directory, and for each: no `.swap` or `.cleaned` file is left after its startup, and the records
//! it serves are at every offset the pre-clean record, with every record the finished pass keeps.
//!
//! Skips with one line without Java, unless `KLOG_REQUIRE_KAFKA=1` (CI), where it fails.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use common::compaction::{copy_dir_keeping_mtimes, CompactedTopic, PARTITION, TOPIC};
use common::failing_rename::FailingRename;
use common::kafka::{kafka_available, workload};
use common::klog_cleaner::{clean_logs, served_records, topic_config, wall_clock_ms};
use common::sorted_entries;
use klog::log::config::LogConfig;
use klog::log::io::Storage;
use klog::log::log_dir::LogDir;
use serde_json::Value;

/// The steps the pass is stopped at (one partition each, after partition 0).
const STEPS: usize = 7;

/// A group's segments in one cleaned segment: several 16 KiB source segments per group.
const GROUP_BYTES: u32 = 65_536;

/// One pass of klog's cleaner over `partition` of `root` through `storage`, then the log directory
/// dropped as a crash leaves it (no close): the pass's result.
fn pass(
    storage: Arc<dyn Storage>,
    root: &Path,
    partition: &str,
    config: &LogConfig,
    now_ms: i64,
) -> Result<(), String> {
    let mut log_dir = LogDir::open(storage, root).map_err(|e| e.to_string())?;
    let (log, _) = log_dir
        .open_partition(partition, config.clone())
        .map_err(|e| e.to_string())?;
    let reports = clean_logs(&mut log_dir, &log, now_ms).map_err(|e| e.to_string())?;
    assert!(reports.iter().all(|r| r.cleaned), "{reports:?}");
    Ok(())
}

/// The swap renames of a whole pass, chosen by kind: (from, to) file names and what the step is.
fn steps(renames: &[(String, String)]) -> Vec<((String, String), &'static str)> {
    let swaps: Vec<&(String, String)> = renames
        .iter()
        .filter(|(from, to)| {
            [".cleaned", ".swap", ".deleted"]
                .iter()
                .any(|s| from.ends_with(s) || to.ends_with(s))
        })
        .collect();
    // A group ends with its last `.swap -> ""`, before the next group's first `.cleaned -> .swap`.
    let first_group_end = swaps
        .windows(2)
        .position(|w| w[0].0.ends_with(".swap") && w[1].0.ends_with(".cleaned"))
        .map_or(swaps.len(), |i| i + 1);
    let group = &swaps[..first_group_end];
    let kind = |p: fn(&(String, String)) -> bool| group.iter().copied().filter(move |r| p(r));
    let to_swap = |r: &(String, String)| r.1.ends_with(".swap");
    let to_deleted = |r: &(String, String)| r.1.ends_with(".deleted");
    let from_swap = |r: &(String, String)| r.0.ends_with(".swap");
    let last_group_start = (1..swaps.len())
        .rev()
        .find(|&i| swaps[i].0.ends_with(".cleaned") && swaps[i - 1].0.ends_with(".swap"))
        .unwrap_or_else(|| panic!("the pass swapped one group only: {swaps:?}"));
    let last_group_deleted = swaps[last_group_start..]
        .iter()
        .copied()
        .find(|r| r.1.ends_with(".deleted"));
    let chosen = [
        (kind(to_swap).next(), "the first .cleaned -> .swap"),
        (kind(to_swap).next_back(), "the last .cleaned -> .swap"),
        (kind(to_deleted).next(), "the first old file -> .deleted"),
        (
            kind(to_deleted).next_back(),
            "the last old file -> .deleted",
        ),
        (kind(from_swap).next(), "the first .swap -> its name"),
        (kind(from_swap).next_back(), "the last .swap -> its name"),
        (
            last_group_deleted,
            "the last group's first old file -> .deleted",
        ),
    ];
    chosen
        .into_iter()
        .map(|(r, what)| {
            let r = r.unwrap_or_else(|| panic!("no rename for {what} in {swaps:?}"));
            (r.clone(), what)
        })
        .collect()
}

/// Gives partition `to` of the log directory `data` partition 0's files from `source` (its own
/// `partition.metadata` kept) and partition 0's entries in the root checkpoints.
fn give_partition(data: &Path, source: &Path, to: usize) {
    let dir = data.join(format!("{TOPIC}-{to}"));
    for file in sorted_entries(&dir) {
        if file.file_name().is_some_and(|n| n != "partition.metadata") {
            std::fs::remove_file(&file).expect("empty the partition");
        }
    }
    let copy = data.join(format!("copy-{to}"));
    copy_dir_keeping_mtimes(source, &copy);
    for file in sorted_entries(&copy) {
        let name = file.file_name().expect("a name").to_owned();
        if name != "partition.metadata" {
            std::fs::rename(&file, dir.join(name)).expect("move into the partition");
        }
    }
    std::fs::remove_dir_all(&copy).expect("remove the copy");
    for checkpoint in [
        "recovery-point-offset-checkpoint",
        "log-start-offset-checkpoint",
        "replication-offset-checkpoint",
    ] {
        let path = data.join(checkpoint);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let zero = text
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{TOPIC} 0 ")))
            .map(str::to_owned);
        let Some(zero) = zero else { continue };
        let lines: Vec<String> = text
            .lines()
            .map(|l| match l.strip_prefix(&format!("{TOPIC} {to} ")) {
                Some(_) => format!("{TOPIC} {to} {zero}"),
                None => l.to_owned(),
            })
            .collect();
        std::fs::write(&path, lines.join("\n") + "\n").expect("rewrite a checkpoint");
    }
}

/// Records by offset.
fn by_offset(records: Vec<Value>) -> BTreeMap<i64, Value> {
    records
        .into_iter()
        .map(|r| (r["offset"].as_i64().expect("an offset"), r))
        .collect()
}

#[test]
fn klog_swap_leftovers_are_finished_by_a_broker() {
    if !kafka_available() {
        return;
    }
    let (topic, broker) =
        CompactedTopic::create_partitions("kafka-compaction-klog-swap", 120, 30, &[], 1 + STEPS);
    broker.stop();
    let data = topic.cluster.data.clone();
    let base = topic.root.join("base");
    topic.copy_data(&base);
    let mut config = topic_config(&topic.cluster.meta);
    config.segment_bytes = GROUP_BYTES;
    // The broker keeps min.cleanable.dirty.ratio=1 (it never cleans here); klog's pass may clean.
    config.min_cleanable_dirty_ratio = 0.01;
    let now = wall_clock_ms();

    // The whole pass on a copy: what a finished pass keeps, and its renames.
    let full = topic.root.join("full");
    copy_dir_keeping_mtimes(&base, &full);
    let recorder = FailingRename::new(None);
    pass(recorder.clone(), &full, PARTITION, &config, now).expect("the whole pass");
    let (pre, cleaned) = (
        by_offset(served_records(&base, PARTITION, &config)),
        by_offset(served_records(&full, PARTITION, &config)),
    );
    assert!(
        cleaned.len() < pre.len(),
        "the pass kept {} of {}",
        cleaned.len(),
        pre.len()
    );
    let steps = steps(&recorder.rename_names());

    for (i, (rename, what)) in steps.iter().enumerate() {
        give_partition(&data, &base.join(PARTITION), i + 1);
        let storage = FailingRename::new(Some(rename.clone()));
        let partition = format!("{TOPIC}-{}", i + 1);
        let result = pass(storage.clone(), &data, &partition, &config, now);
        assert!(
            storage.failed() && result.is_err(),
            "the pass did not stop at {what} ({rename:?}): {result:?}"
        );
    }

    let broker = topic.cluster.start();
    for (i, (rename, what)) in steps.iter().enumerate() {
        let partition = i + 1;
        for file in sorted_entries(&data.join(format!("{TOPIC}-{partition}"))) {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                !name.ends_with(".swap") && !name.ends_with(".cleaned"),
                "{name} left after the broker started on the pass stopped at {what} ({rename:?})"
            );
        }
        let served: Vec<Value> = workload(&[
            "consume",
            &broker.bootstrap,
            TOPIC,
            "read_uncommitted",
            &partition.to_string(),
        ])
        .into_iter()
        .filter(|line| line.get("end_offset").is_none())
        .collect();
        let served = by_offset(served);
        for (offset, record) in &served {
            assert_eq!(
                pre.get(offset),
                Some(record),
                "offset {offset} served after the pass stopped at {what}"
            );
        }
        for offset in cleaned.keys() {
            assert!(
                served.contains_key(offset),
                "offset {offset}, kept by the finished pass, lost after the pass stopped at {what}"
            );
        }
        eprintln!(
            "stopped at {what} ({} -> {}): the broker serves {} records (pre-clean {}, cleaned {})",
            rename.0,
            rename.1,
            served.len(),
            pre.len(),
            cleaned.len()
        );
    }
    broker.stop();
}
