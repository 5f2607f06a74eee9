//! EIO, ENOSPC and short writes at every operation of an append-and-flush sequence, on simulated storage:
//! the failing call returns an error, the log refuses further writes until reopened, and a reopen (after a
//! crash or not) holds everything synced before the fault, with every batch whole.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::clock::ManualClock;
use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Batches, Compression};
use klog_log::io::{Fault, SimStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog};
use klog_log::KafkaError;

fn batch(i: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    b.append(
        1_000 + i as i64,
        Some(b"key"),
        Some(&vec![i as u8; 300 + i * 7]),
        &[],
    )
    .unwrap();
    b.build().unwrap()
}

fn open(storage: &Arc<dyn Storage>, dir: &Path, options: OpenOptions) -> PartitionLog {
    let config = LogConfig::from_pairs(["segment.bytes=2500", "index.interval.bytes=200"]).unwrap();
    PartitionLog::open_with_clock(
        storage.clone(),
        dir,
        config,
        options,
        Arc::new(ManualClock::new(5_000)),
    )
    .expect("reopen after a fault")
    .0
}

/// Returns whether the fault fired during the appends.
fn run(fault: Fault, at: u64, crash: bool) -> bool {
    let sim = SimStorage::new(at);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let dir = PathBuf::from("/faults/t-0");
    let log = open(&storage, &dir, OpenOptions::default());
    for i in 0..6 {
        log.append_as_leader(&mut batch(i), 1).unwrap();
    }
    log.flush(log.log_end_offset()).unwrap();
    let synced = log.log_end_offset();
    sim.inject(sim.ops() + at, fault);
    let mut failed_at = None;
    for i in 6..20 {
        let r = log.append_as_leader(&mut batch(i), 1).and_then(|_| {
            if i % 3 == 0 {
                log.flush(log.log_end_offset())
            } else {
                Ok(())
            }
        });
        if let Err(e) = r {
            failed_at = Some(i);
            assert!(log.is_failed(), "fault {fault:?} at op +{at}: {e}");
            let again = log.append_as_leader(&mut batch(99), 1).unwrap_err();
            assert_eq!(again.kafka_error(), KafkaError::KafkaStorageError);
            break;
        }
    }
    let flushed = log.recovery_point();
    assert!(flushed >= synced);
    let start = log.log_start_offset();
    drop(log);
    sim.clear_faults();
    if crash {
        sim.crash(at.is_multiple_of(2));
    }
    let log = open(
        &storage,
        &dir,
        OpenOptions {
            recovery_point: flushed,
            log_start_offset: start,
            clean_shutdown: false,
        },
    );
    assert!(
        log.log_end_offset() >= flushed,
        "fault {fault:?} at op +{at} (failed at append {failed_at:?}), crash {crash}: LEO {} lost synced data up to {flushed}",
        log.log_end_offset()
    );
    log.update_high_watermark(log.log_end_offset());
    let mut offset = 0;
    while offset < log.log_end_offset() {
        let r = log.read(offset, 1 << 20, None, true).unwrap();
        for b in Batches::new(r.records.as_slice()) {
            let b = b.expect("every batch after recovery is whole and valid");
            assert_eq!(b.base_offset(), offset, "contiguous offsets");
            offset = b.last_offset() + 1;
        }
    }
    // And the log takes appends again.
    log.append_as_leader(&mut batch(42), 2).unwrap();
    failed_at.is_some()
}

#[test]
fn a_fault_at_any_operation_loses_nothing_synced() {
    let mut fired = 0;
    for fault in [Fault::Eio, Fault::Enospc, Fault::ShortWrite] {
        for at in 1..60 {
            for crash in [false, true] {
                fired += run(fault, at, crash) as usize;
            }
        }
    }
    assert!(
        fired > 200,
        "the faults must land inside the appends: {fired} of 354 did"
    );
}
