//! An append that returns an error leaves no batch in the log: not in memory (the log end stays, a read
//! finds nothing), and not after a crash. Kafka's `UnifiedLog.append` assigns the leader epoch (and
//! writes the `leader-epoch-checkpoint`) before the segment append, so a failed checkpoint write fails
//! the append before its batch exists. Found by the crash simulation (`KLOG_SEED=35`, crash at +44, on
//! the direct write path): after a truncation emptied the epoch cache, the next leader append wrote its
//! batch into the active segment's tail, then failed writing the checkpoint; the log dropped its tail to
//! the disk and, after the crash, recovery found a whole batch nobody had been told was appended.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::clock::ManualClock;
use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Batches, Compression};
use klog_log::io::{Fault, SimStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog};

fn batch(i: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    b.append(
        1_000 + i as i64,
        Some(b"key"),
        Some(&vec![i as u8; 100 + i]),
        &[],
    )
    .unwrap();
    b.build().unwrap()
}

fn open(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    options: OpenOptions,
    direct: bool,
) -> PartitionLog {
    let preallocate = if direct { "true" } else { "false" };
    let config = LogConfig::from_pairs([
        "segment.bytes=2500",
        "index.interval.bytes=200",
        &format!("preallocate={preallocate}"),
    ])
    .unwrap();
    PartitionLog::open_with_clock(
        storage.clone(),
        dir,
        config,
        options,
        Arc::new(ManualClock::new(5_000)),
    )
    .expect("open")
    .0
}

fn sim(seed: u64, direct: bool) -> SimStorage {
    if direct {
        SimStorage::new(seed).with_direct_writes()
    } else {
        SimStorage::new(seed)
    }
}

/// The batches a log holds from its start.
fn batches(log: &PartitionLog) -> Vec<(i64, i64)> {
    log.update_high_watermark(log.log_end_offset());
    let mut got = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let r = log.read(offset, 1 << 20, None, true).unwrap();
        let before = got.len();
        for b in Batches::new(r.records.as_slice()) {
            let b = b.expect("whole batches");
            offset = b.last_offset() + 1;
            got.push((b.base_offset(), b.last_offset()));
        }
        if got.len() == before {
            break;
        }
    }
    got
}

/// The crash simulation's case: the power goes out at the first operation of a leader append that
/// starts a new leader epoch (on the direct write path, the checkpoint's write: the batch itself goes
/// to the tail in memory). The append fails; the log is dropped (its tail written out, unsynced) and
/// the machine crashes. Recovery must not find the batch.
#[test]
fn a_leader_append_failing_at_its_epoch_checkpoint_is_not_in_the_log_after_a_crash() {
    for direct in [true, false] {
        for seed in 1..=12u64 {
            let ctx = format!("direct {direct}, seed {seed}");
            let sim = sim(seed, direct);
            let storage: Arc<dyn Storage> = Arc::new(sim.clone());
            let dir = PathBuf::from("/failed-append/t-0");
            let log = open(&storage, &dir, OpenOptions::default(), direct);
            log.append_as_leader(&mut batch(0), 0).unwrap();
            log.flush(log.log_end_offset()).unwrap();
            let flushed = log.recovery_point();
            assert_eq!(flushed, 1, "{ctx}");
            sim.power_off_at(sim.ops() + 1);
            let e = log
                .append_as_leader(&mut batch(1), 1)
                .expect_err("the power is off");
            assert_eq!(
                log.log_end_offset(),
                1,
                "{ctx}: the failed append ({e}) moved the log end"
            );
            assert_eq!(
                batches(&log),
                vec![(0, 0)],
                "{ctx}: the failed append's batch is readable"
            );
            drop(log);
            sim.crash(seed % 2 == 0);
            let options = OpenOptions {
                recovery_point: flushed,
                log_start_offset: 0,
                clean_shutdown: false,
            };
            let log = open(&storage, &dir, options, direct);
            assert_eq!(
                batches(&log),
                vec![(0, 0)],
                "{ctx}: after the crash the log holds a batch whose append failed ({e})"
            );
            assert_eq!(log.log_end_offset(), 1, "{ctx}");
        }
    }
}

/// Without a crash: an EIO at any operation of a leader append that starts a new epoch (a roll, the
/// checkpoint, the segment write) leaves the log end where it was and the batch unreadable.
#[test]
fn a_leader_append_failing_at_any_operation_leaves_the_log_as_it_was() {
    let mut failures = 0;
    for direct in [true, false] {
        for at in 1..=12u64 {
            for epoch_change in [true, false] {
                let ctx = format!("direct {direct}, EIO at op +{at}, new epoch {epoch_change}");
                let sim = sim(at, direct);
                let storage: Arc<dyn Storage> = Arc::new(sim.clone());
                let dir = PathBuf::from("/failed-append/t-0");
                let log = open(&storage, &dir, OpenOptions::default(), direct);
                for i in 0..6 {
                    log.append_as_leader(&mut batch(i), 0).unwrap();
                }
                let before = batches(&log);
                let leo = log.log_end_offset();
                sim.inject(sim.ops() + at, Fault::Eio);
                let epoch = if epoch_change { 1 } else { 0 };
                let Err(e) = log.append_as_leader(&mut batch(6), epoch) else {
                    continue;
                };
                failures += 1;
                assert_eq!(
                    log.log_end_offset(),
                    leo,
                    "{ctx}: the failed append ({e}) moved the log end"
                );
                assert_eq!(
                    batches(&log),
                    before,
                    "{ctx}: the failed append's ({e}) batch is readable"
                );
            }
        }
    }
    assert!(failures >= 4, "the faults must hit the appends: {failures}");
}
