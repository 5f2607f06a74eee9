//! `klog producers DIR`: the producer state a partition directory holds once loaded (snapshot plus replay),
//! and the offsets that depend on it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use klog::log::io::StdStorage;
use klog::log::log_dir::LogDir;
use serde_json::json;

use super::append::split_partition_dir;
use super::topic_config::{configs_json, configs_text, ConfigArgs, TopicConfigs};

#[derive(Debug, Args)]
pub struct ProducersArgs {
    /// The partition directory, `<log dir>/<topic>-<partition>`.
    dir: PathBuf,
    /// One JSON object (see docs/cli.md).
    #[arg(long)]
    json: bool,
    /// Topic configs (`--config`, e.g. `producer.id.expiration.ms`, which decides which producers a
    /// snapshot load keeps) over the metadata log's.
    #[command(flatten)]
    config: ConfigArgs,
}

pub fn run(args: &ProducersArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.dir.is_dir(),
        "{}: no such partition directory",
        args.dir.display()
    );
    let (root, name) = split_partition_dir(&args.dir)?;
    // A reader: no lock, producer state replayed in memory, no snapshot written.
    let log_dir = LogDir::open_read_only(Arc::new(StdStorage), &root)?;
    let configs = TopicConfigs::load(&args.config, &root)?;
    let config = configs.for_partition(&root, &name);
    let (log, _) = log_dir.open_partition(&name, config.config.clone())?;
    let producers: Vec<serde_json::Value> = log
        .producers()
        .iter()
        .map(|p| {
            json!({
                "producer_id": p.producer_id(),
                "producer_epoch": p.producer_epoch(),
                "last_sequence": p.last_seq(),
                "last_offset": p.last_data_offset(),
                "offset_delta": p.last_offset_delta(),
                "last_timestamp": p.last_timestamp(),
                "coordinator_epoch": p.coordinator_epoch(),
                "current_txn_first_offset": p.current_txn_first_offset(),
            })
        })
        .collect();
    let summary = json!({
        "log_end_offset": log.log_end_offset(),
        "high_watermark": log.high_watermark(),
        "last_stable_offset": log.last_stable_offset(),
        "first_unstable_offset": log.first_unstable_offset(),
        "producers": producers,
        "metadata_log": configs.metadata_dir().map(|d| d.display().to_string()),
        "configs": configs_json(&config),
    });
    log.close()?;
    log_dir.close()?;
    if args.json {
        outln!("{summary}");
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "log end offset: {} high watermark: {} last stable offset: {} first unstable offset: {}",
        summary["log_end_offset"],
        summary["high_watermark"],
        summary["last_stable_offset"],
        summary["first_unstable_offset"]
    );
    for p in summary["producers"].as_array().into_iter().flatten() {
        outln!(
            "producerId: {} producerEpoch: {} lastSequence: {} lastOffset: {} offsetDelta: {} lastTimestamp: {} coordinatorEpoch: {} currentTxnFirstOffset: {}",
            p["producer_id"], p["producer_epoch"], p["last_sequence"], p["last_offset"], p["offset_delta"],
            p["last_timestamp"], p["coordinator_epoch"], p["current_txn_first_offset"]
        );
    }
    if let Some(c) = configs_text(&config) {
        outln!("configs: {c}");
    }
    Ok(ExitCode::SUCCESS)
}
