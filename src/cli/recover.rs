//! `klog recover DIR...` (the recovery replay tool) and `klog verify DIR...`. Each DIR is a log directory
//! (every partition in it is handled on its own) or a single partition directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use klog::log::checkpoint::{
    read_offsets_salvaging, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
};
use klog::log::config::LogConfig;
use klog::log::io::{IoBackend, IoWorkload, ReadOnlyStorage, StdStorage, Storage};
use klog::log::kraft::TopicConfig;
use klog::log::log_dir::partition_dir_names;
use klog::log::log_dir::LogDir;
use klog::log::partition_log::partition_dir_name;
use klog::recovery::verify::verify as verify_partition;
use klog::recovery::{LogLoader, Problem, RecoveryReport};
use serde_json::json;

use super::topic_config::{configs_json, configs_text, ConfigArgs, TopicConfigs};

#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// Log directories, or partition directories.
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// One JSON object per partition.
    #[arg(long)]
    json: bool,
    /// Report what recovery would do, write nothing: a read-only open (no lock; works on a read-only file
    /// system and beside a running writer).
    #[arg(long)]
    dry_run: bool,
    /// Partitions recovered at once (Kafka's `num.recovery.threads.per.data.dir`); default: one per core.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
    #[command(flatten)]
    config: ConfigArgs,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Log directories, or partition directories.
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// One JSON object per partition.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    config: ConfigArgs,
}

/// (log dir, the partitions to handle: all when None).
fn targets(dir: &Path) -> anyhow::Result<(PathBuf, Option<String>)> {
    anyhow::ensure!(dir.is_dir(), "{}: no such directory", dir.display());
    let has_segments = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .any(|e| e.file_name().to_string_lossy().ends_with(".log"));
    if has_segments {
        // Segment files: a partition directory, whose name must then be one (Kafka's rules).
        let (root, name) = super::append::split_partition_dir(dir)?;
        return Ok((root, Some(name)));
    }
    Ok((dir.to_owned(), None))
}

fn report_json(
    r: &RecoveryReport,
    configs: &TopicConfigs,
    config: &TopicConfig,
) -> serde_json::Value {
    json!({
        "partition": r.partition,
        "clean_shutdown": r.clean_shutdown,
        "log_start_offset": r.log_start_offset,
        "log_end_offset": r.log_end_offset,
        "recovery_point": r.recovery_point,
        "segments_scanned": r.segments_scanned,
        "bytes_validated": r.bytes_validated,
        "truncated": r.truncated.iter().map(|t| json!({
            "offset": t.offset, "segment": t.segment, "position": t.position, "bytes": t.bytes, "reason": t.reason,
        })).collect::<Vec<_>>(),
        "bytes_truncated": r.bytes_truncated,
        "rebuilt_indexes": r.rebuilt_indexes,
        "swaps_completed": r.swaps_completed,
        "snapshot_loaded": r.snapshot_loaded,
        "snapshots_deleted": r.snapshots_deleted,
        "batches_replayed": r.batches_replayed,
        "mirror_pid_resets": r.mirror_pid_resets,
        "producers": r.producers,
        "snapshots_written": r.snapshots_written,
        "duration_ms": r.duration_ms,
        "metadata_log": configs.metadata_dir().map(|d| d.display().to_string()),
        "configs": configs_json(config),
    })
}

pub fn recover(args: &RecoverArgs) -> anyhow::Result<ExitCode> {
    let mut ok = true;
    // SIGTERM/SIGINT: the partition in progress finishes and is closed, the checkpoints are written,
    // the rest is left for the next run.
    super::shutdown::install()?;
    let mut interrupted = None;
    let threads = args.threads.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        usize::from,
    );
    for dir in &args.dirs {
        let (root, only) = targets(dir)?;
        // A dry run is a reader: the same recovery, in memory over the files opened read-only (no lock,
        // nothing written, no segment copied: memory is the rebuilt indexes and snapshots).
        let storage: Arc<dyn Storage> = if args.dry_run {
            Arc::new(ReadOnlyStorage::new(Arc::new(StdStorage)))
        } else {
            // Recovery reads each segment and rewrites indexes and snapshots: buffered writes.
            super::cluster_open::writer_storage(IoBackend::Auto, &root, IoWorkload::Buffered)?
        };
        let loader = LogLoader::new(storage.clone(), LogConfig::default());
        let configs = TopicConfigs::load(&args.config, &root)?;
        // Recovery reads past checkpoint lines it cannot parse, and says so: their partitions are rescanned.
        let (mut log_dir, problems) = LogDir::open_salvaging(storage.clone(), &root)?;
        for p in problems {
            errln!("klog: warning: {p}; the entry is dropped (that partition gets Kafka's default for a missing entry: recovery point 0, log start at its first segment, high watermark at its log start)");
        }
        let names: Vec<String> = match &only {
            Some(name) => vec![name.clone()],
            None => loader.partition_names(&root)?,
        };
        // Each partition with its topic's config (index interval, segment sizes, ...), resolved once
        // here (warnings on stderr in name order), handed to the loader's threads by name.
        let partition_configs: BTreeMap<String, TopicConfig> = names
            .iter()
            .map(|name| (name.clone(), configs.for_partition(&root, name)))
            .collect();
        let log_configs: BTreeMap<String, LogConfig> = partition_configs
            .iter()
            .map(|(name, c)| (name.clone(), c.config.clone()))
            .collect();
        let loader = loader
            .with_threads(threads)
            .with_partition_configs(Arc::new(move |name: &str| {
                log_configs.get(name).cloned().unwrap_or_default()
            }));
        let progress = progress_bar(names.len() as u64);
        let outcomes = loader.load_partitions(
            &log_dir,
            &names,
            !args.dry_run,
            &|| super::shutdown::requested().is_some(),
            &|name| {
                progress.set_message(name.to_owned());
                progress.inc(1);
            },
        );
        if outcomes.len() < names.len() {
            interrupted = super::shutdown::requested();
        }
        // Closed together at the end: one rewrite of each checkpoint file, not one per partition.
        let mut recovered = Vec::new();
        for (name, outcome) in outcomes {
            let config = &partition_configs[&name];
            match outcome {
                Ok((log, report)) => {
                    if !args.dry_run {
                        recovered.push(log);
                    }
                    if args.json {
                        outln!("{}", report_json(&report, &configs, config));
                    } else {
                        print_report(&root, &report, config);
                    }
                }
                Err(e) => {
                    ok = false;
                    if args.json {
                        outln!("{}", json!({"partition": name, "error": e.to_string()}));
                    } else {
                        super::print_error(
                            None,
                            format_args!("{}: {e}", root.join(&name).display()),
                        );
                    }
                }
            }
        }
        progress.finish_and_clear();
        if !args.dry_run {
            for result in log_dir.close_partitions(recovered)? {
                result?;
            }
            log_dir.close()?;
        }
        if interrupted.is_some() {
            break;
        }
    }
    if let Some(signal) = interrupted {
        errln!("klog: recover interrupted by signal {signal}: the partitions reported were recovered and closed; run it again for the rest");
        return Ok(super::shutdown::exit_code(signal));
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// A progress bar on stderr when it is a terminal (hidden otherwise, so pipes and CI stay clean).
fn progress_bar(len: u64) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("recovering {pos}/{len} partitions {bar:30} {msg}")
    {
        bar.set_style(style);
    }
    bar
}

fn print_report(root: &Path, r: &RecoveryReport, config: &TopicConfig) {
    let cut = if r.truncated.is_empty() {
        "nothing cut".to_string()
    } else {
        let cuts: Vec<String> = r
            .truncated
            .iter()
            .map(|t| {
                format!(
                    "at offset {} (segment {} position {}, {} bytes: {})",
                    t.offset, t.segment, t.position, t.bytes, t.reason
                )
            })
            .collect();
        format!("{} bytes cut: {}", r.bytes_truncated, cuts.join(", "))
    };
    let configs = configs_text(config)
        .map(|c| format!("; configs: {c}"))
        .unwrap_or_default();
    outln!(
        "{}: {} shutdown; offsets {}..{} (recovery point {}); {} segments scanned, {} bytes validated; {cut}; \
         {} batches replayed ({} MIRROR_PID_RESET) {}; snapshots deleted: {}; {} producers; {} snapshots written; {} ms{configs}",
        root.join(&r.partition).display(),
        if r.clean_shutdown { "clean" } else { "unclean" },
        r.log_start_offset,
        r.log_end_offset,
        r.recovery_point,
        r.segments_scanned,
        r.bytes_validated,
        r.batches_replayed,
        r.mirror_pid_resets,
        r.snapshot_loaded
            .map_or_else(|| "from no snapshot".to_owned(), |o| format!("from snapshot {o}")),
        if r.snapshots_deleted.is_empty() {
            "none".to_owned()
        } else {
            r.snapshots_deleted
                .iter()
                .map(|o| o.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        },
        r.producers,
        r.snapshots_written,
        r.duration_ms
    );
}

/// The log directory's offset checkpoints: every line that does not parse, as `<file>: line N: <what>`
/// (text) or one `{"log_dir", "ok": false, "problems"}` object (JSON). Whether there were none.
fn verify_checkpoints(json: bool, root: &Path) -> anyhow::Result<bool> {
    let mut problems = Vec::new();
    for name in [
        RECOVERY_POINT_CHECKPOINT,
        LOG_START_OFFSET_CHECKPOINT,
        REPLICATION_OFFSET_CHECKPOINT,
    ] {
        let (_, found) = read_offsets_salvaging(&StdStorage, &root.join(name))?;
        problems.extend(found.into_iter().map(|e| match e {
            klog::log::Error::CorruptFile { path, line, reason } => (path, line, reason),
            e => (root.join(name), 0, e.to_string()),
        }));
    }
    if json && !problems.is_empty() {
        let list: Vec<_> = problems
            .iter()
            .map(|(file, line, what)| json!({"file": file.display().to_string(), "line": line, "problem": what}))
            .collect();
        outln!(
            "{}",
            json!({"log_dir": root.display().to_string(), "ok": false, "problems": list})
        );
    } else {
        for (file, line, what) in &problems {
            outln!("{}: line {line}: {what}", file.display());
        }
    }
    Ok(problems.is_empty())
}

pub fn verify(args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let mut ok = true;
    for dir in &args.dirs {
        let (root, only) = targets(dir)?;
        ok &= verify_checkpoints(args.json, &root)?;
        let configs = TopicConfigs::load(&args.config, &root)?;
        let partitions: Vec<String> = match &only {
            Some(p) => vec![p.clone()],
            None => partition_dir_names(&StdStorage, &root)?,
        };
        for name in partitions {
            if super::stdout_closed() {
                break; // nobody reads the rest (`klog verify ... | head -1`)
            }
            let dir = root.join(&name);
            let mut config = None;
            let mut notes = Vec::new();
            let problems = match partition_dir_name(&dir) {
                Ok(_) => {
                    // No check depends on a topic config; the JSON says which the partition has.
                    config = Some(configs.for_partition(&root, &name));
                    match std::fs::read_dir(&dir) {
                        // A directory it may not list is a finding naming it; the others go on.
                        Err(e) => vec![Problem {
                            file: dir.clone(),
                            what: format!("the partition directory cannot be listed: {e}"),
                        }],
                        Ok(_) => {
                            let found = verify_partition(
                                &ReadOnlyStorage::new(Arc::new(StdStorage)),
                                &dir,
                            )?;
                            notes = found.notes;
                            found.problems
                        }
                    }
                }
                Err(e) => {
                    let what = match e {
                        klog::log::Error::InvalidPartitionDir { reason, .. } => {
                            format!("not a partition directory <topic>-<partition>: {reason}")
                        }
                        e => e.to_string(),
                    };
                    vec![Problem { file: dir, what }]
                }
            };
            ok &= problems.is_empty();
            if args.json {
                let list: Vec<_> = problems
                    .iter()
                    .map(|p| json!({"file": p.file.display().to_string(), "problem": p.what}))
                    .collect();
                let notes: Vec<_> = notes
                    .iter()
                    .map(|p| json!({"file": p.file.display().to_string(), "note": p.what}))
                    .collect();
                let configs_of = config.as_ref().map(configs_json);
                outln!(
                    "{}",
                    json!({"partition": name, "ok": problems.is_empty(), "problems": list,
                        "notes": notes,
                        "metadata_log": configs.metadata_dir().map(|d| d.display().to_string()),
                        "configs": configs_of})
                );
            } else {
                // Notes first (derived state the next open rebuilds), then the verdict or the problems.
                for n in notes {
                    outln!("{}: note: {}", n.file.display(), n.what);
                }
                if problems.is_empty() {
                    outln!("{}: ok", root.join(&name).display());
                }
                for p in problems {
                    outln!("{}: {}", p.file.display(), p.what);
                }
            }
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
