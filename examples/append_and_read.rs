//! Embedding klog as a partition's storage: open a log directory, append producer batches as the
//! partition's leader, make them durable, and read them back as a consumer's fetch would.
//!
//! Run: `cargo run --example append_and_read [LOG_DIR]` (default: a temporary directory). The files it
//! writes are Kafka's: point `kafka-dump-log` (or `klog dump`) at `LOG_DIR/orders-0`.

use std::error::Error;
use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use klog::log::config::LogConfig;
use klog::log::format::{AnyBatch, BatchBuilder, Batches, Compression};
use klog::log::io::StdStorage;
use klog::log::log_dir::LogDir;

fn main() -> Result<(), Box<dyn Error>> {
    match std::env::args_os().nth(1) {
        Some(dir) => run(Path::new(&dir)),
        None => run(tempfile::tempdir()?.path()),
    }
}

/// Appends 10 batches of 3 records to `orders-0` under `root`, then reads every record back.
fn run(root: &Path) -> Result<(), Box<dyn Error>> {
    // The writer of a log directory holds its `.lock` until `close`; a second writer is refused.
    let mut log_dir = LogDir::open(Arc::new(StdStorage), root)?;
    // Topic configs use Kafka's names.
    let mut config = LogConfig::default();
    config.set("segment.bytes", "65536")?;
    let (log, _) = log_dir.open_partition("orders-0", config)?;

    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as i64;
    for i in 0..10 {
        // A producer's batch: base offset 0, the leader assigns offsets from its log end.
        let mut builder = BatchBuilder::new(Compression::Zstd);
        for j in 0..3 {
            let value = format!("order {i}-{j}");
            builder.append(now, Some(b"customer-42"), Some(value.as_bytes()), &[])?;
        }
        let mut batch = builder.build()?;
        let info = log.append_as_leader(&mut batch, 0)?;
        println!(
            "appended offsets {}..={}",
            info.first_offset, info.last_offset
        );
    }
    // Durable: returns once every segment holding data below the offset is synced.
    log.flush(log.log_end_offset())?;
    // In a broker the high watermark follows the replicas; alone, everything appended is committed.
    log.update_high_watermark(log.log_end_offset());

    // A fetch: whole batches from the one holding the offset, bounded by the high watermark.
    let mut offset = 0;
    let mut scratch = Vec::new();
    while offset < log.high_watermark() {
        let read = log.read(offset, 4096, Some(log.high_watermark()), true)?;
        for batch in Batches::new(read.records.as_slice()) {
            let AnyBatch::V2(batch) = batch? else {
                continue; // a v0/v1 message set, as an old Kafka wrote it
            };
            for record in batch.records(&mut scratch)? {
                let record = record?;
                let value = String::from_utf8_lossy(record.value.unwrap_or_default());
                println!("offset {}: {value}", record.offset);
            }
        }
        offset = read.next_offset;
    }
    assert_eq!(offset, 30);

    // A clean close: checkpoints written, the clean-shutdown marker set, the lock released.
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
