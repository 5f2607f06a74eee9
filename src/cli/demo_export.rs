//! `klog demo`'s last step: the new primary exported as a Kafka broker's log directory (`klog cluster
//! export --kafka`), with the broker configuration to start Kafka on it. Runs without Java: the broker
//! itself is not started (`tests/kafka_export.rs` does that).

use std::path::Path;
use std::sync::Arc;

use klog::log::clock::SystemClock;
use klog::log::io::{IoBackend, IoWorkload};
use klog::mirror::export::{export, ExportOptions};

/// What the export step shows: the broker configuration to start Kafka with, and what it checked.
pub struct ExportStep {
    /// The `server.properties` lines a stock broker needs for the exported directory.
    pub broker_config: Vec<String>,
    /// The step's closing line.
    pub check: String,
}

/// Exports the cluster in `root` to `<dir>/kafka`; prints nothing (the demo prints the step).
pub fn run(dir: &Path, root: &Path) -> anyhow::Result<ExportStep> {
    let out = dir.join("kafka");
    let report = export(
        super::cluster_open::writer_storage(IoBackend::Auto, root, IoWorkload::Buffered)?,
        Arc::new(SystemClock),
        root,
        &ExportOptions::new(&out),
        &mut |_| {},
    )?;
    let check = format!(
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
    );
    Ok(ExportStep {
        broker_config: report.broker_config,
        check,
    })
}
