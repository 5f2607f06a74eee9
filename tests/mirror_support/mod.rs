//! Shared helpers for the mirroring scenario tests: clusters in a temp directory, producers' batches,
//! and byte-level comparisons of partition logs.
#![allow(dead_code)]

pub mod kafka;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use klog::log::clock::{Clock, ManualClock};
use klog::log::format::{AnyBatch, BatchBuilder, Batches, Compression, ControlRecordType};
use klog::log::io::{StdStorage, Storage};
use klog::log::partition_log::PartitionLog;
use klog::mirror::{Cluster, ClusterOptions};

pub struct Env {
    pub dir: tempfile::TempDir,
    pub clock: Arc<ManualClock>,
}

impl Env {
    pub fn new() -> Self {
        Env {
            dir: tempfile::tempdir().unwrap(),
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
        }
    }

    pub fn root(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn cluster(&self, name: &str) -> Arc<Cluster> {
        self.cluster_on(Arc::new(StdStorage), name)
    }

    pub fn cluster_on(&self, storage: Arc<dyn Storage>, name: &str) -> Arc<Cluster> {
        let clock: Arc<dyn Clock> = self.clock.clone();
        Arc::new(
            Cluster::init(storage, clock, &self.root(name), ClusterOptions::default()).unwrap(),
        )
    }

    pub fn reopen(&self, storage: Arc<dyn Storage>, name: &str) -> Arc<Cluster> {
        let clock: Arc<dyn Clock> = self.clock.clone();
        Arc::new(Cluster::open(storage, clock, &self.root(name)).unwrap())
    }
}

/// `dest` gets mirror `name` whose source is the already open `source`.
pub fn link(dest: &Cluster, name: &str, source: &Arc<Cluster>) {
    dest.create_mirror(name, source.root().to_str().unwrap())
        .unwrap();
    dest.connect_source(name, Arc::new(source.as_source()));
}

pub fn topics(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// Asserts every per-topic result is Ok.
pub fn all_ok(results: Vec<(String, Result<(), klog::mirror::Error>)>) {
    for (t, r) in results {
        r.unwrap_or_else(|e| panic!("{t}: {e}"));
    }
}

/// An idempotent (or transactional) batch of `n` records from `seq`.
pub fn batch(pid: i64, epoch: i16, seq: i32, n: usize, txn: bool, tag: &str) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None)
        .producer(pid, epoch, seq)
        .transactional(txn);
    for i in 0..n {
        let key = format!("{tag}-k{i}");
        let value = format!("{tag}-v{i}-{}", "x".repeat(40));
        b.append(
            1_700_000_000_000 + i as i64,
            Some(key.as_bytes()),
            Some(value.as_bytes()),
            &[],
        )
        .unwrap();
    }
    b.build().unwrap()
}

/// A plain (non-idempotent) batch.
pub fn plain(n: usize, tag: &str) -> Vec<u8> {
    batch(-1, -1, -1, n, false, tag)
}

pub fn marker(commit: bool, pid: i64, epoch: i16) -> Vec<u8> {
    let kind = if commit {
        ControlRecordType::Commit
    } else {
        ControlRecordType::Abort
    };
    BatchBuilder::end_txn_marker(kind, pid, epoch, 0, 1_700_000_000_000)
        .unwrap()
        .build()
        .unwrap()
}

/// A batch as stored: where it is and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub base_offset: i64,
    pub last_offset: i64,
    pub epoch: i32,
    pub producer_id: i64,
    pub control: bool,
    pub bytes: Vec<u8>,
}

impl Stored {
    fn of(b: &klog::log::format::RecordBatch<'_>) -> Stored {
        Stored {
            base_offset: b.base_offset(),
            last_offset: b.last_offset(),
            epoch: b.partition_leader_epoch(),
            producer_id: b.producer_id(),
            control: b.is_control(),
            bytes: b.as_bytes().to_vec(),
        }
    }
}

/// Every batch in a broker's partition directory, in offset order, as its `.log` files hold them (the
/// active segment may end in a batch still being written: iteration stops there).
pub fn kafka_batches(partition_dir: &Path) -> Vec<Stored> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(partition_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let bytes = std::fs::read(&file).unwrap();
        for b in Batches::new(&bytes) {
            let Ok(AnyBatch::V2(b)) = b else { break };
            out.push(Stored::of(&b));
        }
    }
    out
}

/// A broker's log end offset as its files show it.
pub fn kafka_end(partition_dir: &Path) -> i64 {
    kafka_batches(partition_dir)
        .last()
        .map_or(0, |b| b.last_offset + 1)
}

/// Every batch of a log, from its start.
pub fn batches(log: &PartitionLog) -> Vec<Stored> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    let end = log.log_end_offset();
    while offset < end {
        let read = log.read(offset, 1 << 20, Some(end), true).unwrap();
        for b in Batches::new(read.records.as_slice()) {
            let AnyBatch::V2(b) = b.unwrap() else {
                panic!("legacy batch")
            };
            out.push(Stored::of(&b));
        }
        if read.next_offset <= offset {
            break;
        }
        offset = read.next_offset;
    }
    out
}

pub fn log(c: &Cluster, topic: &str) -> Arc<PartitionLog> {
    c.log(topic, 0).unwrap()
}

/// The control type of a stored control batch's first record.
pub fn control_type(s: &Stored) -> Option<ControlRecordType> {
    if !s.control {
        return None;
    }
    let (b, _) = klog::log::format::RecordBatch::parse(&s.bytes, 0).unwrap();
    let mut scratch = Vec::new();
    let r = b.records(&mut scratch).unwrap().next().unwrap().unwrap();
    let key = r.key.unwrap();
    Some(ControlRecordType::from_id(i16::from_be_bytes([
        key[2], key[3],
    ])))
}

/// Whether a MIRROR_PID_RESET batch's value is the one klog writes: the newest reference layout,
/// `{Version}` (`00 00 00`), with no source cluster id (docs/compatibility.md).
pub fn barrier_value_is_klogs(s: &Stored) -> bool {
    let (b, _) = klog::log::format::RecordBatch::parse(&s.bytes, 0).unwrap();
    let mut scratch = Vec::new();
    let r = b.records(&mut scratch).unwrap().next().unwrap().unwrap();
    r.value == Some(&[0u8, 0, 0][..])
        && klog::log::format::MirrorPidReset::parse(r.value.unwrap()).unwrap()
            == klog::log::format::MirrorPidReset::new()
}

pub fn state_of(c: &Cluster, topic: &str, partition: i32) -> Option<klog::mirror::MirrorState> {
    c.describe()
        .into_iter()
        .find(|d| d.topic == topic && d.partition == partition)
        .and_then(|d| d.state)
}

pub fn lme_of(c: &Cluster, topic: &str) -> Option<i32> {
    c.describe()
        .into_iter()
        .find(|d| d.topic == topic && d.partition == 0)
        .and_then(|d| d.last_mirrored_epoch)
}

pub fn files_equal(a: &Path, b: &Path) -> bool {
    std::fs::read(a).unwrap() == std::fs::read(b).unwrap()
}

/// No wait in a mirroring test is longer than this (a hang guard, not a timing assertion).
pub const CONVERGE: Duration = Duration::from_secs(120);

/// Ticks `b` until `done`, failing with `what` and the last tick's report after [`CONVERGE`].
pub fn converge(b: &Cluster, what: &str, done: impl Fn(&Cluster) -> bool) {
    let started = Instant::now();
    while !done(b) {
        assert!(
            started.elapsed() < CONVERGE,
            "{what}: not reached; last tick {:?}",
            b.tick()
        );
        b.tick();
        std::thread::sleep(Duration::from_millis(20));
    }
}
