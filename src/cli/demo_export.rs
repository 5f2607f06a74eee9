//! `klog demo`'s last step: the new primary exported as a Kafka broker's log directory (`klog cluster
//! export --kafka`), with the broker configuration to start Kafka on it. Runs without Java: the broker
//! itself is not started (`tests/kafka_export.rs` does that).

use std::path::Path;
use std::sync::Arc;

use klog::log::clock::SystemClock;
use klog::log::io::{open_backend, IoBackend};
use klog::mirror::export::{export, ExportOptions};

/// Exports the cluster in `root` to `<dir>/kafka` and prints what a stock broker needs.
pub fn run(dir: &Path, root: &Path) -> anyhow::Result<()> {
    let started = super::demo::heading(7, "Back into service: the new primary exported for a stock Kafka broker");
    let out = dir.join("kafka");
    let report = export(
        open_backend(IoBackend::Std)?,
        Arc::new(SystemClock),
        root,
        &ExportOptions::new(&out),
        &mut |_| {},
    )?;
    outln!("   start Kafka on it (no format step) with:");
    for line in &report.broker_config {
        outln!("     {line}");
    }
    super::demo::checked(
        started,
        &format!(
            "exported {} partitions to {} ({} bytes hard-linked, {} copied), leader epochs {}, a KRaft \
             metadata snapshot and meta.properties",
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
        ),
    );
    Ok(())
}
