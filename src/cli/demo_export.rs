//! `klog demo`'s last step: the new primary exported as a Kafka broker's log directory (`klog cluster
//! export --kafka`), with the broker configuration to start Kafka on it. Runs without Java: the broker
//! itself is not started (`tests/kafka_export.rs` does that).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use klog::log::clock::SystemClock;
use klog::log::io::{open_backend, IoBackend};
use klog::mirror::export::{export, ExportOptions};

/// Exports the cluster in `root` to `<dir>/kafka` and prints what a stock broker needs.
pub fn run(dir: &Path, root: &Path) -> anyhow::Result<()> {
    let started = Instant::now();
    let out = dir.join("kafka");
    let report = export(
        open_backend(IoBackend::Std)?,
        Arc::new(SystemClock),
        root,
        &ExportOptions::new(&out),
        &mut |_| {},
    )?;
    outln!(
        "7. [{:>8.2?}] export for a stock Kafka broker: {} partitions to {} ({} bytes hard-linked, {} \
         copied), leader epochs {}, a KRaft metadata snapshot and meta.properties; start Kafka (no \
         format step) with:",
        started.elapsed(),
        report.partitions.len(),
        out.display(),
        report.transfer.bytes_linked,
        report.transfer.bytes_copied,
        report
            .partitions
            .iter()
            .map(|p| format!("{}-{} {}", p.topic, p.partition, p.leader_epoch))
            .collect::<Vec<_>>()
            .join(", "),
    );
    for line in &report.broker_config {
        outln!("     {line}");
    }
    Ok(())
}
