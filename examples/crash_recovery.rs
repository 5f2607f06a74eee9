//! Recovery after a crash: a writer stops without closing (no clean-shutdown marker) and leaves a torn
//! write at the end of its segment; `LogLoader` opens the directory again, cuts the torn tail, rebuilds
//! what is derived (indexes, producer state) and reports what it found and did.
//!
//! Run: `cargo run --example crash_recovery`. Add `RUST_LOG=info` and a `tracing` subscriber in your
//! program to see the same report as events.

use std::error::Error;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use klog::log::config::LogConfig;
use klog::log::format::{BatchBuilder, Compression};
use klog::log::io::StdStorage;
use klog::log::log_dir::LogDir;
use klog::recovery::LogLoader;

fn main() -> Result<(), Box<dyn Error>> {
    run(tempfile::tempdir()?.path())
}

fn run(root: &Path) -> Result<(), Box<dyn Error>> {
    // 1. A writer appends 100 records and syncs them, then "crashes": nothing is closed.
    {
        let log_dir = LogDir::open(Arc::new(StdStorage), root)?;
        let (log, _) = log_dir.open_partition("events-0", LogConfig::default())?;
        for i in 0..10 {
            let mut b = BatchBuilder::new(Compression::Lz4);
            for j in 0..10 {
                b.append(
                    1_700_000_000_000,
                    None,
                    Some(format!("event {i}-{j}").as_bytes()),
                    &[],
                )?;
            }
            log.append_as_leader(&mut b.build()?, 0)?;
        }
        log.flush(log.log_end_offset())?;
        // Dropped without `close`: the log directory has no clean-shutdown marker.
    }
    // 2. The crash tore the next write: half a batch header at the end of the segment.
    let segment = root.join("events-0/00000000000000000000.log");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&segment)?
        .write_all(&[0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 1])?;

    // 3. Recovery: every partition of the directory, each isolated from the others' failures.
    let loader = LogLoader::new(Arc::new(StdStorage), LogConfig::default());
    let (log_dir, outcomes) = loader.load_dir(root, true)?;
    let mut log_dir = log_dir;
    for (name, outcome) in outcomes {
        let (log, report) = outcome?;
        println!(
            "{name}: clean shutdown {}, log end {}, {} bytes validated, {} bytes cut",
            report.clean_shutdown,
            report.log_end_offset,
            report.bytes_validated,
            report.bytes_truncated
        );
        for cut in &report.truncated {
            println!(
                "  cut segment {} at byte {}: {} ({} bytes)",
                cut.segment, cut.position, cut.reason, cut.bytes
            );
        }
        assert!(!report.clean_shutdown);
        assert_eq!(report.log_end_offset, 100, "every synced record survives");
        assert_eq!(report.bytes_truncated, 11, "the torn write is gone");
        log_dir.close_partition(log)?;
    }
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
