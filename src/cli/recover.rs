//! `klog recover DIR...` (the recovery replay tool) and `klog verify DIR...`. Each DIR is a log directory
//! (every partition in it is handled on its own) or a single partition directory.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use klog::log::config::LogConfig;
use klog::log::io::{ReadOnlyStorage, StdStorage, Storage};
use klog::log::log_dir::LogDir;
use klog::log::partition_log::parse_dir_name;
use klog::recovery::{verify_partition, LogLoader, RecoveryReport};
use serde_json::json;

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
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Log directories, or partition directories.
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// One JSON object per partition.
    #[arg(long)]
    json: bool,
}

/// (log dir, the partitions to handle: all when None).
fn targets(dir: &Path) -> anyhow::Result<(PathBuf, Option<String>)> {
    anyhow::ensure!(dir.is_dir(), "{}: no such directory", dir.display());
    let has_segments = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .any(|e| e.file_name().to_string_lossy().ends_with(".log"));
    if has_segments && parse_dir_name(dir).is_some() {
        let (root, name) = super::append::split_partition_dir(dir)?;
        return Ok((root, Some(name)));
    }
    Ok((dir.to_owned(), None))
}

fn report_json(r: &RecoveryReport) -> serde_json::Value {
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
        "batches_replayed": r.batches_replayed,
        "mirror_pid_resets": r.mirror_pid_resets,
        "producers": r.producers,
        "snapshots_written": r.snapshots_written,
        "duration_ms": r.duration_ms,
    })
}

pub fn recover(args: &RecoverArgs) -> anyhow::Result<ExitCode> {
    let mut ok = true;
    // SIGTERM/SIGINT: the partition in progress finishes and is closed, the checkpoints are written,
    // the rest is left for the next run.
    super::shutdown::install()?;
    let mut interrupted = None;
    for dir in &args.dirs {
        let (root, only) = targets(dir)?;
        // A dry run is a reader: the same recovery, in memory over the files opened read-only (no lock,
        // nothing written, no segment copied: memory is the rebuilt indexes and snapshots).
        let storage: Arc<dyn Storage> = if args.dry_run {
            Arc::new(ReadOnlyStorage::new(Arc::new(StdStorage)))
        } else {
            Arc::new(StdStorage)
        };
        let loader = LogLoader::new(storage.clone(), LogConfig::default());
        let mut log_dir = LogDir::open(storage.clone(), &root)?;
        let names: Vec<String> = match &only {
            Some(name) => vec![name.clone()],
            None => loader.partition_names(&root)?,
        };
        let progress = progress_bar(names.len() as u64);
        for name in names {
            if let Some(signal) = super::shutdown::requested() {
                interrupted = Some(signal);
                break;
            }
            progress.set_message(name.clone());
            let outcome = loader.load_partition_isolated(&log_dir, &name, !args.dry_run);
            progress.inc(1);
            match outcome {
                Ok((log, report)) => {
                    if !args.dry_run {
                        log_dir.close_partition(log)?;
                    }
                    print_report(args.json, &root, &report);
                }
                Err(e) => {
                    ok = false;
                    if args.json {
                        println!("{}", json!({"partition": name, "error": e.to_string()}));
                    } else {
                        eprintln!("klog: {}: {e}", root.join(&name).display());
                    }
                }
            }
        }
        progress.finish_and_clear();
        if !args.dry_run {
            log_dir.close()?;
        }
        if interrupted.is_some() {
            break;
        }
    }
    if let Some(signal) = interrupted {
        eprintln!("klog: recover interrupted by signal {signal}: the partitions reported were recovered and closed; run it again for the rest");
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

fn print_report(json: bool, root: &Path, r: &RecoveryReport) {
    if json {
        println!("{}", report_json(r));
        return;
    }
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
    println!(
        "{}: {} shutdown; offsets {}..{} (recovery point {}); {} segments scanned, {} bytes validated; {cut}; \
         {} batches replayed ({} MIRROR_PID_RESET) from snapshot {:?}; {} producers; {} snapshots written; {} ms",
        root.join(&r.partition).display(),
        if r.clean_shutdown { "clean" } else { "unclean" },
        r.log_start_offset,
        r.log_end_offset,
        r.recovery_point,
        r.segments_scanned,
        r.bytes_validated,
        r.batches_replayed,
        r.mirror_pid_resets,
        r.snapshot_loaded,
        r.producers,
        r.snapshots_written,
        r.duration_ms
    );
}

pub fn verify(args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let mut ok = true;
    for dir in &args.dirs {
        let (root, only) = targets(dir)?;
        let mut partitions: Vec<String> = match &only {
            Some(p) => vec![p.clone()],
            None => std::fs::read_dir(&root)?
                .filter_map(Result::ok)
                .filter(|e| e.path().is_dir() && parse_dir_name(&e.path()).is_some())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
        };
        partitions.sort();
        for name in partitions {
            let storage = ReadOnlyStorage::new(Arc::new(StdStorage));
            let problems = verify_partition(&storage, &root.join(&name))?;
            ok &= problems.is_empty();
            if args.json {
                let list: Vec<_> = problems
                    .iter()
                    .map(|p| json!({"file": p.file.display().to_string(), "problem": p.what}))
                    .collect();
                println!(
                    "{}",
                    json!({"partition": name, "ok": problems.is_empty(), "problems": list})
                );
            } else if problems.is_empty() {
                println!("{}: ok", root.join(&name).display());
            } else {
                for p in problems {
                    println!("{}: {}", p.file.display(), p.what);
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
