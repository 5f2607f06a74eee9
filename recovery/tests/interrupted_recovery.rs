//! A recovery interrupted at any storage operation, then run again, ends where one uninterrupted
//! recovery ends: the same segments byte for byte, the same indexes, log end, leader epochs and producer
//! state. The operations of one recovery (an unclean open, the snapshot at the log end, the clean close)
//! are counted first; then for every operation k, on a fresh copy of the same crashed partition:
//! - ENOSPC at k (the process goes on: the open, snapshot or close fails), then a recovery without faults;
//! - the power cut at k (every later operation fails, then `crash`, torn or not), then a recovery.
//!
//! The crashed partition has everything recovery acts on: a torn batch in the second-to-last segment
//! (cut, and the last segment deleted), a segment past the recovery point without its indexes (rebuilt
//! by the rescan), a leader-epoch checkpoint that has epoch 2 start after its first batch (derived again
//! from the batches: epochs 0, 1 and 2),
//! a corrupt producer snapshot past the recovery point (deleted), idempotent and transactional producers
//! with an aborted transaction (the `.txnindex` rebuilt, the producer state replayed).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::clock::ManualClock;
use klog_log::config::LogConfig;
use klog_log::format::{AnyBatch, BatchBuilder, Batches, Compression, ControlRecordType};
use klog_log::io::{Fault, SimStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog};
use klog_log::producer_state::{list_snapshots, snapshot_path};
use klog_log::segment::LogSegment;
use klog_log::validator::AppendOrigin;
use klog_log::Error;

const NOW: i64 = 1_800_000_000_000;

fn config() -> LogConfig {
    LogConfig::from_pairs(["segment.bytes=2500", "index.interval.bytes=256"]).unwrap()
}

fn open(sim: &SimStorage, dir: &Path, options: OpenOptions) -> Result<PartitionLog, Error> {
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let clock = Arc::new(ManualClock::new(NOW));
    PartitionLog::open_with_clock(storage, dir, config(), options, clock).map(|(l, _)| l)
}

fn unclean(recovery_point: i64) -> OpenOptions {
    OpenOptions {
        recovery_point,
        log_start_offset: 0,
        clean_shutdown: false,
    }
}

fn data_batch(producer: i64, seq: i32, transactional: bool, i: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None)
        .producer(producer, 0, seq)
        .transactional(transactional);
    for r in 0..2 {
        let value = format!("value {i} {r} {}", "x".repeat((i % 7) as usize * 20));
        b.append(NOW, Some(b"k"), Some(value.as_bytes()), &[])
            .unwrap();
    }
    b.build().unwrap()
}

/// The crashed partition (see the module's doc); returns its recovery point.
fn crashed_partition(sim: &SimStorage, dir: &Path) -> i64 {
    let log = open(sim, dir, OpenOptions::default()).unwrap();
    let (mut seq, mut txn_seq) = (0, 0);
    let mut recovery_point = 0;
    for i in 0..60i64 {
        let epoch = (i / 20) as i32;
        if i % 9 == 4 {
            let mut b = data_batch(3, txn_seq, true, i);
            log.append_as_leader(&mut b, epoch).unwrap();
            txn_seq += 2;
            let mut abort = BatchBuilder::end_txn_marker(ControlRecordType::Abort, 3, 0, 0, NOW)
                .unwrap()
                .build()
                .unwrap();
            log.append_as_leader_with_origin(&mut abort, epoch, AppendOrigin::Coordinator)
                .unwrap();
        } else {
            let mut b = data_batch(1, seq, false, i);
            log.append_as_leader(&mut b, epoch).unwrap();
            seq += 2;
        }
        if i == 30 {
            log.flush(log.log_end_offset()).unwrap();
            recovery_point = log.recovery_point();
        }
    }
    let bases = log.segment_base_offsets();
    log.close().unwrap();
    assert!(bases.len() >= 6, "{bases:?}");
    let first_unflushed = bases.iter().rposition(|&b| b < recovery_point).unwrap();
    // Torn: the end of the second-to-last segment's last batch.
    let torn = LogSegment::log_path(dir, bases[bases.len() - 2]);
    let mut bytes = sim.live_bytes(&torn).unwrap();
    bytes.truncate(bytes.len() - 7);
    sim.corrupt(&torn, bytes).unwrap();
    // A segment past the recovery point without its indexes.
    let rebuilt = bases[first_unflushed + 1];
    for p in [
        LogSegment::index_path(dir, rebuilt),
        LogSegment::time_index_path(dir, rebuilt),
    ] {
        sim.remove(&p).unwrap();
    }
    // An epoch checkpoint the batches contradict: epoch 2 starting later than its first batch.
    let epochs = dir.join("leader-epoch-checkpoint");
    let text = String::from_utf8(sim.live_bytes(&epochs).unwrap()).unwrap();
    let (head, last) = text.trim_end().rsplit_once('\n').unwrap();
    let (epoch, start) = last.split_once(' ').unwrap();
    assert_eq!(epoch, "2", "{text}");
    let start: i64 = start.parse().unwrap();
    let wrong = format!("{head}\n2 {}\n", start + 4);
    sim.corrupt(&epochs, wrong.into_bytes()).unwrap();
    // A corrupt producer snapshot past the recovery point.
    let snapshots = list_snapshots(sim, dir).unwrap();
    let corrupt = *snapshots
        .iter()
        .find(|&&o| o > bases[first_unflushed + 1])
        .expect("a snapshot past the recovery point");
    let path = snapshot_path(dir, corrupt);
    let mut bytes = sim.live_bytes(&path).unwrap();
    bytes[8] ^= 0x5a;
    sim.corrupt(&path, bytes).unwrap();
    sim.sync_dir(dir).unwrap();
    recovery_point
}

/// A segment's base offset, `.log` bytes and offset-index entries.
type SegmentImage = (i64, Vec<u8>, Vec<(i64, u32)>);

/// What a recovery leaves: every segment's base, `.log` bytes and offset-index entries, the log end,
/// the leader epochs and the producers.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    segments: Vec<SegmentImage>,
    log_end_offset: i64,
    epochs: Vec<(i32, i64)>,
    producers: Vec<(i64, i16, i32, i64, Option<i64>)>,
    aborted: Vec<(i64, i64)>,
}

fn outcome(log: &PartitionLog) -> Outcome {
    let segments = log
        .segment_base_offsets()
        .into_iter()
        .map(|base| {
            let seg = log.segment(base).unwrap();
            let bytes = seg.read_bytes(0, seg.size() as usize).unwrap();
            (base, bytes, seg.offset_index_entries().unwrap())
        })
        .collect();
    let mut producers: Vec<_> = log
        .producers()
        .into_iter()
        .map(|p| {
            (
                p.producer_id(),
                p.producer_epoch(),
                p.last_seq(),
                p.last_data_offset(),
                p.current_txn_first_offset(),
            )
        })
        .collect();
    producers.sort();
    let aborted = log
        .segment_base_offsets()
        .into_iter()
        .flat_map(|base| {
            let seg = log.segment(base).unwrap();
            seg.collect_aborted(i64::MIN, i64::MAX).0
        })
        .map(|t| (t.producer_id.get(), t.first_offset.get()))
        .collect();
    Outcome {
        segments,
        log_end_offset: log.log_end_offset(),
        epochs: log
            .leader_epochs()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect(),
        producers,
        aborted,
    }
}

/// One recovery as `klog recover` runs it: the unclean open, a snapshot at the log end, a clean close.
/// The outcome is taken before the close.
fn recover(sim: &SimStorage, dir: &Path, recovery_point: i64) -> Result<Outcome, Error> {
    let log = open(sim, dir, unclean(recovery_point))?;
    log.take_snapshot()?;
    let outcome = outcome(&log);
    log.close()?;
    Ok(outcome)
}

/// The first offset of each leader epoch, read from the batches themselves.
fn epochs_of_batches(outcome: &Outcome) -> Vec<(i32, i64)> {
    let mut epochs: Vec<(i32, i64)> = Vec::new();
    for (_, bytes, _) in &outcome.segments {
        for b in Batches::new(bytes) {
            let AnyBatch::V2(b) = b.unwrap() else {
                continue;
            };
            let epoch = b.partition_leader_epoch();
            if epochs.last().is_none_or(|&(e, _)| epoch > e) {
                epochs.push((epoch, b.base_offset()));
            }
        }
    }
    epochs
}

#[derive(Debug, Clone, Copy)]
enum Interruption {
    Enospc,
    PowerCut,
}

fn interrupted_then_recovered(k: u64, how: Interruption, expected: &Outcome) -> bool {
    let sim = SimStorage::new(41 + k);
    let dir = PathBuf::from("/interrupted/t-0");
    let recovery_point = crashed_partition(&sim, &dir);
    let start = sim.ops();
    match how {
        Interruption::Enospc => sim.inject(start + k, Fault::Enospc),
        Interruption::PowerCut => sim.power_off_at(start + k),
    }
    let first = recover(&sim, &dir, recovery_point);
    let reached = sim.ops() >= start + k;
    match how {
        Interruption::Enospc => sim.clear_faults(),
        Interruption::PowerCut => sim.crash(k.is_multiple_of(2)),
    }
    let ctx = format!("{how:?} at operation {k} of the recovery");
    if reached {
        assert!(
            first.is_err(),
            "{ctx}: the failed operation went unnoticed: {first:?}"
        );
    }
    let second = recover(&sim, &dir, recovery_point)
        .unwrap_or_else(|e| panic!("{ctx}: the recovery after it failed: {e}"));
    assert!(
        second == *expected,
        "{ctx}: the second recovery differs from one uninterrupted recovery:\n  log end {} (expected {}), \
         epochs {:?} (expected {:?}), producers {:?} (expected {:?}), segments {:?} (expected {:?})",
        second.log_end_offset,
        expected.log_end_offset,
        second.epochs,
        expected.epochs,
        second.producers,
        expected.producers,
        second.segments.iter().map(|s| (s.0, s.1.len())).collect::<Vec<_>>(),
        expected.segments.iter().map(|s| (s.0, s.1.len())).collect::<Vec<_>>(),
    );
    reached
}

#[test]
fn a_recovery_interrupted_at_any_operation_then_run_again_equals_one_recovery() {
    let sim = SimStorage::new(41);
    let dir = PathBuf::from("/interrupted/t-0");
    let recovery_point = crashed_partition(&sim, &dir);
    let start = sim.ops();
    let expected = recover(&sim, &dir, recovery_point).unwrap();
    let operations = sim.ops() - start;
    // What the crashed partition asks of recovery is all there, and the epochs are the batches'.
    assert_eq!(expected.epochs, epochs_of_batches(&expected));
    assert_eq!(expected.epochs.len(), 3, "{:?}", expected.epochs);
    assert!(!expected.aborted.is_empty());
    assert!(operations > 10, "{operations} operations");
    for how in [Interruption::Enospc, Interruption::PowerCut] {
        for k in 1..=operations {
            assert!(
                interrupted_then_recovered(k, how, &expected),
                "{how:?}: operation {k} of {operations} was never reached"
            );
        }
    }
    eprintln!("a recovery of {operations} storage operations, interrupted at each by ENOSPC and by a power cut");
}
