//! `klog append DIR FILE`: appends the concatenated batches in FILE to the partition directory DIR (its
//! parent is the log directory whose checkpoints are read and updated), one batch per append as a
//! producer sends them (`--as leader`, the default) or as a follower would (`--as follower`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, ValueEnum};
use klog::log::config::LogConfig;
use klog::log::format::{AnyBatch, Batches};
use klog::log::io::open_backend;
use klog::log::log_dir::LogDir;
use klog::log::validator::AppendOrigin;
use serde_json::json;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Role {
    Leader,
    Follower,
}

#[derive(Debug, Args)]
pub struct AppendArgs {
    /// The partition directory, `<log dir>/<topic>-<partition>` (created if missing).
    dir: PathBuf,
    /// A file of concatenated record batches.
    file: PathBuf,
    #[arg(long = "as", value_enum, default_value = "leader")]
    role: Role,
    /// The leader epoch stamped on leader appends.
    #[arg(long, default_value_t = 0)]
    leader_epoch: i32,
    /// A topic configuration, `key=value` with Kafka's names (repeatable).
    #[arg(long = "config", value_name = "KEY=VALUE")]
    configs: Vec<String>,
    /// One JSON object per batch.
    #[arg(long)]
    json: bool,
}

/// Splits a partition directory path into (log dir, partition directory name).
pub fn split_partition_dir(dir: &Path) -> anyhow::Result<(PathBuf, String)> {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .with_context(|| format!("{}: not a partition directory", dir.display()))?;
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    Ok((parent.to_owned(), name.to_owned()))
}

pub fn run(args: &AppendArgs) -> anyhow::Result<ExitCode> {
    let config = LogConfig::from_pairs(args.configs.iter().map(String::as_str))?;
    let data =
        std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let (root, name) = split_partition_dir(&args.dir)?;
    let storage = open_backend(config.io_backend)?;
    let mut log_dir = LogDir::open(Arc::clone(&storage), &root)?;
    let (log, _) = log_dir.open_partition(&name, config)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut clean = true;
    let mut batches = Batches::new(&data).without_crc();
    for batch in batches.by_ref() {
        let (result, position) = match batch {
            Ok(b) => {
                let mut bytes = b.as_bytes().to_vec();
                let r = match (args.role, b) {
                    // Markers and barriers come from the coordinator, not a producer.
                    (Role::Leader, AnyBatch::V2(v)) if v.is_control() => log
                        .append_as_leader_with_origin(
                            &mut bytes,
                            args.leader_epoch,
                            AppendOrigin::Coordinator,
                        ),
                    (Role::Leader, _) => log.append_as_leader(&mut bytes, args.leader_epoch),
                    (Role::Follower, _) => log.append_as_follower(&bytes),
                };
                (r, b.position())
            }
            Err(e) => (Err(e), 0),
        };
        match result {
            Ok(info) => {
                log.update_high_watermark(log.log_end_offset());
                let (first, last) = (info.first_offset, info.last_offset);
                let line = match (args.json, info.duplicate) {
                    (true, true) => json!({"base_offset": first, "last_offset": last, "duplicate": true}).to_string(),
                    (true, false) => json!({"base_offset": first, "last_offset": last}).to_string(),
                    (false, true) => format!("duplicate of offsets {first}..={last} (batch at position {position}): nothing written"),
                    (false, false) => format!("appended offsets {first}..={last} (batch at position {position})"),
                };
                writeln!(out, "{line}")?;
            }
            Err(e) => {
                clean = false;
                let name = e.kafka_error().name();
                if args.json {
                    writeln!(out, "{}", json!({"error": name, "message": e.to_string()}))?;
                } else {
                    writeln!(out, "error {name} (batch at position {position}): {e}")?;
                }
                if log.is_failed() {
                    break;
                }
            }
        }
    }
    if let Some(tail) = batches
        .tail()
        .filter(|t| *t != klog::log::format::Tail::Clean)
    {
        clean = false;
        let message = format!(
            "{}: data after the last whole batch: {tail:?}",
            args.file.display()
        );
        if args.json {
            writeln!(
                out,
                "{}",
                json!({"error": "CORRUPT_MESSAGE", "message": message})
            )?;
        } else {
            writeln!(out, "error CORRUPT_MESSAGE: {message}")?;
        }
    }
    if !log.is_failed() {
        log.flush(log.log_end_offset())?;
        log_dir.close_partition(log)?;
        log_dir.close()?;
    }
    Ok(if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
