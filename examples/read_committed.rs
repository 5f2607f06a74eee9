//! Transactions: a committed and an aborted transaction and one still open, then a read_committed
//! fetch, bounded by the last stable offset, with the aborted batches left out as a Kafka consumer
//! at `isolation.level=read_committed` does.
//!
//! Run: `cargo run --example read_committed`.

use std::collections::HashSet;
use std::error::Error;
use std::path::Path;
use std::sync::Arc;

use klog::log::config::LogConfig;
use klog::log::format::{AnyBatch, BatchBuilder, Batches, Compression, ControlRecordType};
use klog::log::io::StdStorage;
use klog::log::log_dir::LogDir;
use klog::log::partition_log::PartitionLog;
use klog::log::validator::AppendOrigin;

const NOW: i64 = 1_700_000_000_000;

fn main() -> Result<(), Box<dyn Error>> {
    run(tempfile::tempdir()?.path())
}

/// A transactional batch of `producer_id` with one record.
fn produce(log: &PartitionLog, producer_id: i64, value: &str) -> Result<(), Box<dyn Error>> {
    let mut b = BatchBuilder::new(Compression::None)
        .producer(producer_id, 0, 0)
        .transactional(true);
    b.append(NOW, None, Some(value.as_bytes()), &[])?;
    log.append_as_leader(&mut b.build()?, 0)?;
    Ok(())
}

/// The COMMIT or ABORT marker the transaction coordinator writes.
fn end(
    log: &PartitionLog,
    producer_id: i64,
    marker: ControlRecordType,
) -> Result<(), Box<dyn Error>> {
    let mut m = BatchBuilder::end_txn_marker(marker, producer_id, 0, 0, NOW)?.build()?;
    log.append_as_leader_with_origin(&mut m, 0, AppendOrigin::Coordinator)?;
    Ok(())
}

fn run(root: &Path) -> Result<(), Box<dyn Error>> {
    let mut log_dir = LogDir::open(Arc::new(StdStorage), root)?;
    let (log, _) = log_dir.open_partition("payments-0", LogConfig::default())?;
    produce(&log, 1, "paid")?; // offset 0
    produce(&log, 2, "refunded by mistake")?; // offset 1
    end(&log, 1, ControlRecordType::Commit)?; // offset 2
    end(&log, 2, ControlRecordType::Abort)?; // offset 3
    produce(&log, 3, "pending")?; // offset 4: its transaction is still open
    log.update_high_watermark(log.log_end_offset());
    println!(
        "log end {}, high watermark {}, last stable offset {}",
        log.log_end_offset(),
        log.high_watermark(),
        log.last_stable_offset()
    );

    // The fetch stops at the LSO and lists the aborted transactions overlapping it (from `.txnindex`).
    let (read, aborted) = log.read_committed(0, 1 << 20, true)?;
    let mut pending: Vec<_> = aborted
        .iter()
        .map(|t| (t.first_offset.get(), t.producer_id.get()))
        .collect();
    pending.sort();
    // The consumer's rule: a producer is aborted from its transaction's first offset to its ABORT marker.
    let mut aborting = HashSet::new();
    let mut seen = Vec::new();
    let mut scratch = Vec::new();
    for batch in Batches::new(read.records.as_slice()) {
        let AnyBatch::V2(batch) = batch? else {
            continue;
        };
        for &(_, pid) in pending
            .iter()
            .filter(|(first, _)| *first <= batch.last_offset())
        {
            aborting.insert(pid);
        }
        pending.retain(|(first, _)| *first > batch.last_offset());
        if batch.is_control() {
            if let Some(r) = batch.control_record()? {
                if r.record_type == ControlRecordType::Abort {
                    aborting.remove(&batch.producer_id());
                }
            }
            continue; // markers are never delivered to the application
        }
        if batch.is_transactional() && aborting.contains(&batch.producer_id()) {
            continue;
        }
        for record in batch.records(&mut scratch)? {
            let record = record?;
            seen.push(String::from_utf8_lossy(record.value.unwrap_or_default()).into_owned());
        }
    }
    println!(
        "read_committed sees {seen:?} (next offset {})",
        read.next_offset
    );
    assert_eq!(seen, ["paid"]);
    assert_eq!(read.next_offset, 4);

    log_dir.close_partition(log)?;
    log_dir.close()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn runs_to_completion() {
        let dir = tempfile::tempdir().unwrap();
        super::run(dir.path()).unwrap();
    }
}
