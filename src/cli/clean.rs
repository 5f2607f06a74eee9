//! `klog clean DIR...`: one pass of the log cleaner (Kafka's `Cleaner.clean`) on every compacted
//! partition of a log directory, a klog cluster's root or a single partition directory. A writer: it
//! holds the log directory's `.lock` (a broker's directory is refused), reads and writes its
//! `cleaner-offset-checkpoint`; `--dry-run` is a reader (no lock, files opened read-only, nothing
//! written) reporting what a pass would do.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use klog::log::cleaner::{CleanOptions, CleanReport, CleanerConfig, FilterStats};
use klog::log::clock::{Clock, SystemClock};
use klog::log::io::{IoBackend, IoWorkload, StdStorage};
use klog::log::log_dir::{partition_dir_names, LogDir};
use klog::log::partition_log::read_only_view;
use klog::mirror::Cluster;
use serde_json::json;

use super::topic_config::{ConfigArgs, TopicConfigs};

#[derive(Debug, Args)]
pub struct CleanArgs {
    /// Log directories (a Kafka broker's, or a klog cluster's root), or partition directories.
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// One JSON object per partition.
    #[arg(long)]
    json: bool,
    /// Report what a pass would remove, write nothing: a read-only open (no lock; works beside a
    /// running writer and on a read-only file system).
    #[arg(long)]
    dry_run: bool,
    /// The pass's clock reading, milliseconds since the epoch (Kafka's `currentTime`: delete horizons,
    /// compaction lags); default: now. The same files, checkpoint and `--now` give the same bytes.
    #[arg(long, value_name = "MS")]
    now: Option<i64>,
    /// Clean every compacted partition, even one whose dirty ratio is not above
    /// `min.cleanable.dirty.ratio`.
    #[arg(long)]
    force: bool,
    /// `log.cleaner.dedupe.buffer.size`: the offset map's memory (default 134217728); a pass whose keys
    /// do not fit cleans a prefix of the dirty range, as Kafka's does.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..=(isize::MAX as u64)))]
    dedupe_buffer_size: Option<u64>,
    /// Threads of a pass's rewrite (default: the available parallelism, at most 2; 1 is Kafka's one
    /// cleaner thread). Groups are still swapped in one at a time in log order: the bytes are the same.
    #[arg(long, value_name = "N")]
    threads: Option<std::num::NonZeroUsize>,
    #[command(flatten)]
    config: ConfigArgs,
}

/// A partition's outcome: its report, or the error that stopped its pass.
struct Outcome {
    /// `<root>/<topic>-<partition>`.
    dir: PathBuf,
    result: Result<CleanReport, String>,
}

/// (log dir, the one partition to clean: all when None), as `recover` and `verify` take DIR.
fn targets(dir: &Path) -> anyhow::Result<(PathBuf, Option<String>)> {
    anyhow::ensure!(dir.is_dir(), "{}: no such directory", dir.display());
    let has_segments = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .any(|e| e.file_name().to_string_lossy().ends_with(".log"));
    if has_segments {
        let (root, name) = super::append::split_partition_dir(dir)?;
        return Ok((root, Some(name)));
    }
    Ok((dir.to_owned(), None))
}

pub fn run(args: &CleanArgs) -> anyhow::Result<ExitCode> {
    let mut cleaner = CleanerConfig::default();
    if let Some(size) = args.dedupe_buffer_size {
        cleaner.dedupe_buffer_size = usize::try_from(size)?;
    }
    let opts = CleanOptions {
        now_ms: args.now.unwrap_or_else(|| SystemClock.now_ms()),
        dry_run: args.dry_run,
        force: args.force,
        max_dirty_bytes: None,
        threads: args.threads,
    };
    let mut ok = true;
    for dir in &args.dirs {
        let (root, only) = targets(dir)?;
        let outcomes = if Cluster::exists(&StdStorage, &root) {
            clean_cluster(&root, only.as_deref(), &cleaner, &opts)?
        } else {
            clean_log_dir(args, &root, only.as_deref(), &cleaner, &opts)?
        };
        for o in outcomes {
            ok &= o.result.is_ok();
            print_outcome(&o, args.json, args.dry_run);
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// A Kafka log directory (or any plain one): each partition with its topic config (`--config`, then the
/// metadata log); the compacted ones opened and cleaned one at a time, the others reported as skipped
/// without being opened.
fn clean_log_dir(
    args: &CleanArgs,
    root: &Path,
    only: Option<&str>,
    cleaner: &CleanerConfig,
    opts: &CleanOptions,
) -> anyhow::Result<Vec<Outcome>> {
    let mut log_dir = if args.dry_run {
        LogDir::open_read_only(Arc::new(StdStorage), root)?
    } else {
        // A writer: `io_backend=auto` through the directory's measured decision (named at `-v`).
        let storage =
            super::cluster_open::writer_storage(IoBackend::Auto, root, IoWorkload::Buffered)?;
        LogDir::open(storage, root)?
    };
    let configs = TopicConfigs::load(&args.config, root)?;
    let names = match only {
        Some(name) => vec![name.to_owned()],
        None => partition_dir_names(log_dir.storage().as_ref(), root)?,
    };
    let mut out = Vec::new();
    for name in names {
        let config = configs.for_partition(root, &name).config;
        let dir = root.join(&name);
        if !config.cleanup_policy.compact {
            let report = CleanReport {
                skipped: Some("not compacted (cleanup.policy has no compact)".to_owned()),
                ..CleanReport::default()
            };
            out.push(Outcome {
                dir,
                result: Ok(report),
            });
            continue;
        }
        let result = log_dir
            .open_partition(&name, config)
            .map_err(|e| e.to_string())
            .and_then(|(log, _)| {
                let cleaned = log_dir.clean(&[&log], cleaner, opts);
                let closed = log_dir.close_partition(log);
                let mut reports = cleaned.map_err(|e| e.to_string())?;
                closed.map_err(|e| e.to_string())?;
                reports
                    .pop()
                    .ok_or_else(|| "the cleaner returned no report".to_owned())
            });
        out.push(Outcome { dir, result });
    }
    log_dir.close()?;
    Ok(out)
}

/// A klog cluster's root: its node's cleaner (`__mirror_state`, `__consumer_offsets`, compacted topics
/// not being mirrored), the topics' configs from `cluster.json`.
fn clean_cluster(
    root: &Path,
    only: Option<&str>,
    cleaner: &CleanerConfig,
    opts: &CleanOptions,
) -> anyhow::Result<Vec<Outcome>> {
    let cluster = if opts.dry_run {
        Cluster::open(
            read_only_view(Arc::new(StdStorage)),
            Arc::new(SystemClock),
            root,
        )
    } else {
        // A writer, on `io_backend=auto`'s durable choice as every cluster command.
        Cluster::open_backend(IoBackend::Auto, Arc::new(SystemClock), root)
    }
    .map_err(|e| anyhow::anyhow!("opening cluster {}: {e}", root.display()))?;
    let outcomes = cluster
        .clean(cleaner, opts)
        .into_iter()
        .map(|c| Outcome {
            dir: root.join(format!("{}-{}", c.topic, c.partition)),
            result: c.result.map_err(|e| e.to_string()),
        })
        .filter(|o| only.is_none_or(|n| o.dir.file_name().is_some_and(|f| f == n)))
        .collect();
    cluster.close()?;
    Ok(outcomes)
}

fn stats_json(s: &FilterStats) -> serde_json::Value {
    json!({
        "batches_read": s.batches_read, "records_read": s.records_read,
        "records_retained": s.records_retained, "tombstones_removed": s.tombstones_removed,
        "markers_removed": s.markers_removed, "aborted_removed": s.aborted_removed,
        "batches_emptied": s.batches_emptied, "batches_rebuilt": s.batches_rebuilt,
        "bytes_read": s.bytes_read, "bytes_written": s.bytes_written,
    })
}

fn report_json(dir: &Path, r: &CleanReport, dry_run: bool) -> serde_json::Value {
    let partition = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    json!({
        "partition": partition,
        "dir": dir.display().to_string(),
        "dry_run": dry_run,
        "cleaned": r.cleaned,
        "skipped": r.skipped,
        "first_dirty_offset": r.range.first_dirty_offset,
        "first_uncleanable_offset": r.range.first_uncleanable_offset,
        "clean_bytes": r.range.clean_bytes,
        "cleanable_bytes": r.range.cleanable_bytes,
        "cleanable_ratio": r.range.cleanable_ratio,
        "needs_compaction_now": r.range.needs_compaction_now,
        "end_offset": r.end_offset,
        "map_entries": r.map_entries,
        "map_full": r.map_full,
        "groups": r.groups,
        "stats": stats_json(&r.stats),
        "segments_before": r.segments_before,
        "segments_after": r.segments_after,
        "bytes_before": r.bytes_before,
        "bytes_after": r.bytes_after,
    })
}

/// `0-49 100`: each group's segment base offsets, first-last.
fn groups_text(groups: &[Vec<i64>]) -> String {
    let list: Vec<String> = groups
        .iter()
        .map(|g| match (g.first(), g.last()) {
            (Some(a), Some(b)) if a != b => format!("[{a}..{b}]"),
            (Some(a), _) => format!("[{a}]"),
            _ => "[]".to_owned(),
        })
        .collect();
    if list.is_empty() {
        "none".to_owned()
    } else {
        list.join(" ")
    }
}

fn report_text(dir: &Path, r: &CleanReport, dry_run: bool) -> String {
    if let Some(why) = &r.skipped {
        return format!("{}: skipped: {why}", dir.display());
    }
    let s = &r.stats;
    let verb = if dry_run { "would clean" } else { "cleaned" };
    format!(
        "{}: {verb} offsets {}..{} (dirty ratio {:.3}{}); map {} entries{}; groups {}; \
         {} batches ({} records) read, {} records kept; removed {} tombstones, {} markers, {} aborted; \
         {} batches rebuilt, {} emptied; {} segments ({} bytes) -> {} segments ({} bytes); checkpoint {}",
        dir.display(),
        r.range.first_dirty_offset,
        r.range.first_uncleanable_offset,
        r.range.cleanable_ratio,
        if r.range.needs_compaction_now {
            ", max.compaction.lag.ms passed"
        } else {
            ""
        },
        r.map_entries,
        if r.map_full {
            " (full: a prefix was cleaned)"
        } else {
            ""
        },
        groups_text(&r.groups),
        s.batches_read,
        s.records_read,
        s.records_retained,
        s.tombstones_removed,
        s.markers_removed,
        s.aborted_removed,
        s.batches_rebuilt,
        s.batches_emptied,
        r.segments_before,
        r.bytes_before,
        r.segments_after,
        r.bytes_after,
        r.end_offset,
    )
}

fn print_outcome(o: &Outcome, json: bool, dry_run: bool) {
    match (&o.result, json) {
        (Ok(r), true) => outln!("{}", report_json(&o.dir, r, dry_run)),
        (Ok(r), false) => outln!("{}", report_text(&o.dir, r, dry_run)),
        (Err(e), true) => {
            let partition = o.dir.file_name().map(|n| n.to_string_lossy().into_owned());
            outln!(
                "{}",
                json!({"partition": partition, "dir": o.dir.display().to_string(), "error": e})
            );
        }
        (Err(e), false) => super::print_error(None, format_args!("{}: {e}", o.dir.display())),
    }
}
