//! `klog cluster export ROOT --kafka OUT`: the cluster written as a Kafka broker's log directory
//! (`klog::mirror::export` does the work; this prints what it wrote). Output formats are in `docs/cli.md`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use klog::log::clock::SystemClock;
use klog::log::io::{IoBackend, IoWorkload};
use klog::mirror::export::{export, ExportOptions, ExportReport};

/// `klog cluster export`'s arguments.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The cluster's root directory.
    pub root: PathBuf,
    /// The Kafka log directory to write (missing or empty).
    #[arg(long = "kafka", value_name = "OUT")]
    pub out: PathBuf,
    /// The target broker's node.id.
    #[arg(long, default_value_t = 1)]
    pub node_id: i32,
    /// The target's cluster.id (default: the klog cluster's).
    #[arg(long)]
    pub cluster_id: Option<String>,
    /// The target's offsets.topic.num.partitions (group records are re-placed when it differs from 50).
    #[arg(long, default_value_t = 50)]
    pub offsets_partitions: u32,
    /// Export mirror partitions that have not failed over (each named in the output).
    #[arg(long)]
    pub force: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Test hook: abort the process (no cleanup, as a kill) after this many export steps.
    #[arg(long, hide = true)]
    pub abort_after_step: Option<u32>,
}

/// Runs the export and prints its report.
pub fn run(args: &ExportArgs) -> anyhow::Result<ExitCode> {
    let options = ExportOptions {
        out: args.out.clone(),
        node_id: args.node_id,
        cluster_id: args.cluster_id.clone(),
        offsets_partitions: args.offsets_partitions,
        force: args.force,
    };
    let mut steps = 0u32;
    let abort_after = args.abort_after_step;
    let mut on_step = |_: &str| {
        steps += 1;
        if abort_after == Some(steps) {
            std::process::abort();
        }
    };
    let report = export(
        // The export's own writes (copies, then one sync each) are buffered ones.
        super::cluster_open::writer_storage(IoBackend::Auto, &args.root, IoWorkload::Buffered)?,
        Arc::new(SystemClock),
        &args.root,
        &options,
        &mut on_step,
    )
    .with_context(|| {
        format!(
            "exporting cluster {} to {}",
            args.root.display(),
            args.out.display()
        )
    })?;
    if args.json {
        outln!("{}", serde_json::to_string(&report)?);
    } else {
        print_text(&report);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_text(r: &ExportReport) {
    outln!(
        "exported {} partitions of {} topics to {} (cluster.id {}, node.id {}, directory.id {})",
        r.partitions.len(),
        r.topics.len(),
        r.out.display(),
        r.cluster_id,
        r.node_id,
        r.directory_id
    );
    outln!(
        "files: {} bytes hard-linked ({} files), {} bytes copied ({} files)",
        r.transfer.bytes_linked,
        r.transfer.files_linked,
        r.transfer.bytes_copied,
        r.transfer.files_copied
    );
    outln!("partition  leader_epoch  log_start  log_end  high_watermark  linked  copied");
    for p in &r.partitions {
        outln!(
            "{}-{}  {}  {}  {}  {}  {}  {}",
            p.topic,
            p.partition,
            p.leader_epoch,
            p.log_start_offset,
            p.log_end_offset,
            p.high_watermark,
            p.transfer.bytes_linked,
            p.transfer.bytes_copied
        );
    }
    outln!(
        "__consumer_offsets: {} partitions{}",
        r.offsets_partitions,
        if r.offsets_replaced {
            " (group records re-placed by group)"
        } else {
            ""
        }
    );
    outln!("metadata snapshot: {}", r.metadata_snapshot.display());
    outln!("next producer id: {}", r.next_producer_id);
    for c in &r.configs_changed {
        outln!("config lowered for one replica: {c}");
    }
    for f in &r.forced {
        outln!("exported although not failed over (--force): {f}");
    }
    outln!("start Kafka (no kafka-storage format) with this server.properties:");
    for line in &r.broker_config {
        outln!("  {line}");
    }
}
