//! The real-Kafka compaction tests' shared setup: a single-node broker with a compacted topic written by
//! the Java workload (repeated keys, tombstones, transactions committed and aborted, every codec) while
//! the broker's cleaner is held back (`min.cleanable.dirty.ratio=1`: a never-cleaned log's ratio is 1.0
//! and Kafka's test is strictly greater), the broker's `cleaner-offset-checkpoint` awaited, and copies
//! of a log directory that keep the files' modification times (the cleaner reads them: the legacy
//! delete horizon, a cleaned segment's mtime, `largestTimestamp` without timestamps).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::kafka::{workload, Broker, Cluster};
use super::scratch_dir;

/// The compacted topic's name; the workload writes its partition 0 only.
pub const TOPIC: &str = "compacted";
/// Its partition directory.
pub const PARTITION: &str = "compacted-0";

/// The topic configs every compaction test starts from: compacted, 16 KiB segments (`segment.bytes` below
/// 1 MiB is refused by a broker; `internal.segment.bytes` is its test override), the cleaner held back,
/// Kafka's default delete retention. A test's own `KEY=VALUE` overrides replace these by key.
pub const BASE_CONFIGS: &[&str] = &[
    "cleanup.policy=compact",
    "internal.segment.bytes=16384",
    "min.cleanable.dirty.ratio=1",
    "delete.retention.ms=86400000",
];

/// A broker holding the compacted topic the workload wrote.
pub struct CompactedTopic {
    pub root: PathBuf,
    pub cluster: Cluster,
    /// The workload's lines: one per record written, `{"offset","producer","txn","key","value",...}`.
    pub produced: Vec<Value>,
}

impl CompactedTopic {
    /// Formats a cluster in a fresh scratch directory `name` (the cleaner backs off 300 ms), starts it,
    /// creates TOPIC with [`BASE_CONFIGS`] and `overrides`, and runs `compact-produce` with `records`
    /// records per producer over `keys` keys. Returns the running broker with the topic.
    pub fn create(
        name: &str,
        records: usize,
        keys: usize,
        overrides: &[&str],
    ) -> (CompactedTopic, Broker) {
        CompactedTopic::create_partitions(name, records, keys, overrides, 1)
    }

    /// [`CompactedTopic::create`] with `partitions` partitions, all on the one broker; the workload still
    /// writes partition 0 only (the others start empty).
    pub fn create_partitions(
        name: &str,
        records: usize,
        keys: usize,
        overrides: &[&str],
        partitions: usize,
    ) -> (CompactedTopic, Broker) {
        let root = scratch_dir(name);
        let cluster = Cluster::format_with(&root, "log.cleaner.backoff.ms=300\n");
        let broker = cluster.start();
        let assignment = vec!["1"; partitions].join("/");
        let mut args = if partitions == 1 {
            vec!["create-topic", &broker.bootstrap, TOPIC]
        } else {
            vec![
                "create-topic-assigned",
                &broker.bootstrap,
                TOPIC,
                &assignment,
            ]
        };
        let key_of = |config: &str| config.split('=').next().unwrap_or("").to_owned();
        let overridden: Vec<String> = overrides.iter().map(|c| key_of(c)).collect();
        args.extend(
            BASE_CONFIGS
                .iter()
                .filter(|c| !overridden.contains(&key_of(c))),
        );
        args.extend(overrides);
        workload(&args);
        let produced = workload(&[
            "compact-produce",
            &broker.bootstrap,
            TOPIC,
            &records.to_string(),
            &keys.to_string(),
        ]);
        assert!(
            produced.len() > records * 5,
            "the workload wrote {} records",
            produced.len()
        );
        let topic = CompactedTopic {
            root,
            cluster,
            produced,
        };
        (topic, broker)
    }

    /// The partition directory in the broker's log directory.
    pub fn partition_dir(&self) -> PathBuf {
        self.cluster.data.join(PARTITION)
    }

    /// Sets topic configs (`KEY=VALUE`) through the running broker.
    pub fn alter(&self, broker: &Broker, configs: &[&str]) {
        let mut args = vec!["alter-topic-config", &broker.bootstrap, TOPIC];
        args.extend(configs);
        workload(&args);
    }

    /// Produces more: `compact-produce` again (its offsets continue the log's), returning its lines.
    pub fn produce_more(&mut self, broker: &Broker, records: usize, keys: usize) -> Vec<Value> {
        let more = workload(&[
            "compact-produce",
            &broker.bootstrap,
            TOPIC,
            &records.to_string(),
            &keys.to_string(),
        ]);
        self.produced.extend(more.iter().cloned());
        more
    }

    /// Waits until the broker's `cleaner-offset-checkpoint` holds an entry for TOPIC's partition 0 that
    /// differs from `before` (a pass finished), failing with the broker log's tail after two minutes.
    pub fn await_clean(&self, broker: &Broker, before: Option<i64>) -> i64 {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let now = cleaner_checkpoint(&self.cluster.data);
            if let Some(offset) = now.filter(|_| now != before) {
                return offset;
            }
            assert!(
                Instant::now() < deadline,
                "the broker's cleaner did not checkpoint {PARTITION} past {before:?}:\n{}",
                broker.tail()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Copies the broker's log directory (partition, root checkpoints; the metadata log lives apart) to
    /// `to`, keeping modification times. The broker must be stopped.
    pub fn copy_data(&self, to: &Path) {
        copy_dir_keeping_mtimes(&self.cluster.data, to);
    }
}

/// The `cleaner-offset-checkpoint` entry for partition 0 of TOPIC in log directory `data`, if any.
pub fn cleaner_checkpoint(data: &Path) -> Option<i64> {
    let text = std::fs::read_to_string(data.join("cleaner-offset-checkpoint")).ok()?;
    text.lines().skip(2).find_map(|line| {
        let mut fields = line.split_whitespace();
        match (fields.next(), fields.next(), fields.next()) {
            (Some(TOPIC), Some("0"), Some(offset)) => offset.parse().ok(),
            _ => None,
        }
    })
}

/// Copies a directory tree, each file's modification time kept.
pub fn copy_dir_keeping_mtimes(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the copy's directory");
    for entry in std::fs::read_dir(from).expect("read the directory to copy") {
        let entry = entry.expect("a directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            copy_dir_keeping_mtimes(&entry.path(), &target);
            continue;
        }
        std::fs::copy(entry.path(), &target).expect("copy a file");
        let modified = entry
            .metadata()
            .and_then(|m| m.modified())
            .expect("a modification time");
        std::fs::File::options()
            .write(true)
            .open(&target)
            .and_then(|f| f.set_modified(modified))
            .expect("keep the modification time");
    }
}
