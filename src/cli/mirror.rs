//! `klog cluster`, `klog topic` and `klog mirror`: local clusters and KIP-1279 mirroring between them.
//! A cluster is one root directory (a Kafka log directory plus `cluster.json`); a mirror's source is
//! another cluster's root. Output formats are in `docs/cli.md`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, Subcommand};
use klog::log::checkpoint::TopicId;
use klog::log::clock::{Clock, SystemClock};
use klog::log::io::IoBackend;
use klog::mirror::cluster::TopicResults;
use klog::mirror::{Cluster, ClusterOptions};
use serde_json::json;

use super::cluster_open::{open, with_cluster, with_reader};

/// A line of output (`outln!`: a closed pipe drops it, the command goes on).
macro_rules! say {
    ($($arg:tt)*) => {
        outln!($($arg)*)
    };
}

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Create a cluster in ROOT (a new log directory with its cluster id and `__mirror_state`).
    Init {
        /// The cluster's root directory (created if missing; must not hold a cluster).
        root: PathBuf,
        /// Kafka's 22-character base64 cluster id (default: random).
        #[arg(long)]
        cluster_id: Option<String>,
        /// Partitions of `__mirror_state` (mirror.state.topic.num.partitions).
        #[arg(long, default_value_t = 3)]
        mirror_state_partitions: u32,
        /// Print `{"root", "cluster_id"}`.
        #[arg(long)]
        json: bool,
    },
    /// Take over a stopped Kafka broker's log directory: a new cluster in INTO with the broker's
    /// topics (names, ids, partition counts, configs), partition files (sealed segments hard-linked on
    /// the same file system, the rest copied), producer state and group offsets.
    Import {
        /// The broker's log directory (`log.dirs`); the broker must be stopped (its `.lock` free).
        kafka_log_dir: PathBuf,
        /// The new cluster's root (missing or empty).
        #[arg(long)]
        into: PathBuf,
        /// The broker's `metadata.log.dir`, when `__cluster_metadata-0` is not in KAFKA_LOG_DIR.
        #[arg(long)]
        metadata_log_dir: Option<PathBuf>,
        /// Copy every file, never hard-link (to start the broker on its directory again later).
        #[arg(long)]
        copy: bool,
        /// Partitions of the new cluster's `__mirror_state` (mirror.state.topic.num.partitions).
        #[arg(long, default_value_t = 3)]
        mirror_state_partitions: u32,
        /// Print the import report as one JSON object (the fields in docs/cli.md).
        #[arg(long)]
        json: bool,
    },
    /// Write the cluster as the log directory of a one-node Kafka KRaft broker that starts on it with no
    /// format step (partition files linked or copied, metadata snapshot, checkpoints, meta.properties).
    Export(super::export::ExportArgs),
}

#[derive(Debug, Subcommand)]
pub enum TopicCommand {
    /// Create a topic.
    Create {
        /// The cluster's root directory.
        root: PathBuf,
        /// The topic's name (Kafka's rules; no `__` prefix).
        topic: String,
        /// Number of partitions.
        #[arg(long, default_value_t = 1)]
        partitions: i32,
        /// Keep this topic id (base64), as a mirror does.
        #[arg(long)]
        topic_id: Option<String>,
        /// A topic configuration, `key=value` with Kafka's names (repeatable).
        #[arg(long = "config", value_name = "KEY=VALUE")]
        configs: Vec<String>,
        /// Print `{"topic", "topic_id", "partitions"}`.
        #[arg(long)]
        json: bool,
    },
    /// Elect a leader again: the partition's leader epoch goes up by one.
    Elect {
        /// The cluster's root directory.
        root: PathBuf,
        /// The topic.
        topic: String,
        /// The partition whose leader epoch goes up.
        #[arg(long, default_value_t = 0)]
        partition: i32,
        /// Print `{"topic", "partition", "leader_epoch"}`.
        #[arg(long)]
        json: bool,
    },
    /// Delete a topic (its partition directories are renamed `<dir>.<id>-delete`, as Kafka does).
    Delete {
        /// The cluster's root directory.
        root: PathBuf,
        /// The topic to delete.
        topic: String,
    },
    /// Grow a topic to more partitions (kafka-topics --alter --partitions).
    Alter {
        /// The cluster's root directory.
        root: PathBuf,
        /// The topic to grow.
        topic: String,
        /// The new number of partitions (more than it has).
        #[arg(long)]
        partitions: i32,
    },
    /// Set or delete local topic configs (on a mirror topic: overrides of the source's) and print the
    /// configs in force.
    Config(super::mirror_meta::TopicConfigArgs),
}

#[derive(Debug, Subcommand)]
pub enum MirrorCommand {
    /// CreateMirror: NAME copies topics from SOURCE (another cluster's root, or kafka://host:port).
    Create {
        /// The root directory of the cluster that mirrors (the destination).
        root: PathBuf,
        /// The mirror's name (topic-name rules).
        name: String,
        /// The source: a klog cluster's root directory, or `kafka://host:port[,host:port...]`.
        #[arg(long)]
        source: String,
        /// How a failover ends the source's open transactions: `truncate` (read_committed, cut to the
        /// LSO: the seed design) or `abort` (read_uncommitted, an ABORT marker each: every source
        /// offset kept). See docs/mirroring.md.
        #[arg(long, default_value = "truncate", value_parser = ["truncate", "abort"])]
        stop_mode: String,
        /// A mirror config, `key=value` with the reference's names (repeatable):
        /// `mirror.support.unclean.leader.election=true` converges with a source's unclean leader
        /// election instead of failing the partition; the sync filters `topic.properties.exclude`,
        /// `groups.include`, `groups.exclude`, `acls.include`.
        #[arg(long = "config", value_name = "KEY=VALUE")]
        configs: Vec<String>,
    },
    /// Start mirroring topics (creating them with the source's id and partition count).
    Add(TopicsArgs),
    /// Fail over: stop mirroring the topics and make them writable here.
    Remove(TopicsArgs),
    /// Pause mirroring the topics: the fetchers stop (PAUSING -> PAUSED), the topics stay read-only.
    Pause(TopicsArgs),
    /// Resume paused topics: mirroring goes on from the local log end (PAUSED -> MIRRORING); also resets
    /// their FAILED partitions (retried at the next pass).
    Resume(TopicsArgs),
    /// Reset the FAILED partitions of TOPICS (default: every topic of the mirror), even those no longer
    /// retried: the next `mirror run` retries them at once.
    Retry {
        root: PathBuf,
        name: String,
        topics: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// DeleteMirror (every topic must be STOPPED).
    Delete {
        /// The cluster's root directory.
        root: PathBuf,
        /// The mirror to delete.
        name: String,
    },
    /// Drive the state machine and the fetchers.
    Run(RunArgs),
    /// Per partition: mirror, state, source and local end offsets, lag, last mirrored epoch; then each
    /// topic's configs in force (synced from the source, or local overrides).
    Describe {
        /// The cluster's root directory.
        root: PathBuf,
        /// One JSON object with every partition (the fields in docs/cli.md).
        #[arg(long)]
        json: bool,
        /// Also the ACL bindings: the cluster's own and those each mirror synced.
        #[arg(long)]
        acls: bool,
    },
}

#[derive(Debug, Args)]
pub struct TopicsArgs {
    /// The cluster's root directory.
    root: PathBuf,
    /// The mirror.
    name: String,
    /// The topics (at least one).
    #[arg(required = true)]
    topics: Vec<String>,
    /// One JSON object per topic: `{"topic", "error", "message"}`.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The cluster's root directory.
    root: PathBuf,
    /// Stop when a pass changes nothing (no transition, no data, no truncation).
    #[arg(long)]
    until_idle: bool,
    /// Stop after this many seconds.
    #[arg(long)]
    timeout: Option<f64>,
    /// Print each transition and a summary as JSON lines.
    #[arg(long)]
    json: bool,
    /// Print each mirror's lag every this many seconds (and at the end); 0: after every pass.
    #[arg(long, default_value_t = 10.0)]
    lag_interval: f64,
}

pub fn cluster(cmd: &ClusterCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ClusterCommand::Init {
            root,
            cluster_id,
            mirror_state_partitions,
            json,
        } => {
            let c = Cluster::init_backend(
                IoBackend::Auto,
                Arc::new(SystemClock),
                root,
                ClusterOptions {
                    cluster_id: cluster_id.clone(),
                    mirror_state_partitions: *mirror_state_partitions,
                },
            )?;
            let id = c.cluster_id();
            c.close()?;
            if *json {
                say!("{}", json!({"root": root, "cluster_id": id}));
            } else {
                say!("created cluster {id} in {}", root.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        ClusterCommand::Import {
            kafka_log_dir,
            into,
            metadata_log_dir,
            copy,
            mirror_state_partitions,
            json,
        } => {
            let options = klog::mirror::import::ImportOptions {
                metadata_log_dir: metadata_log_dir.clone(),
                copy: *copy,
                mirror_state_partitions: *mirror_state_partitions,
                io_backend: Some(IoBackend::Auto),
            };
            let report = klog::mirror::import::import(
                // `into`'s backend is chosen once nothing can refuse the import (`io_backend`).
                super::cluster_open::storage(),
                Arc::new(SystemClock),
                kafka_log_dir,
                into,
                &options,
            )?;
            if *json {
                say!("{}", serde_json::to_string(&report)?);
            } else {
                super::mirror_import::print_report(&report);
            }
            Ok(ExitCode::SUCCESS)
        }
        ClusterCommand::Export(args) => super::export::run(args),
    }
}

pub fn topic(cmd: &TopicCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        TopicCommand::Create {
            root,
            topic,
            partitions,
            topic_id,
            configs,
            json,
        } => {
            let id = topic_id
                .as_deref()
                .map(|s| TopicId::parse(s).with_context(|| format!("bad topic id {s:?}")))
                .transpose()?;
            let configs = configs
                .iter()
                .map(|kv| {
                    kv.split_once('=')
                        .map(|(k, v)| (k.to_owned(), v.to_owned()))
                        .with_context(|| format!("--config {kv:?}: expected KEY=VALUE"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let id = with_cluster(root, |c| {
                Ok(c.create_topic(topic, *partitions, id, &configs)?)
            })?;
            if *json {
                say!(
                    "{}",
                    json!({"topic": topic, "topic_id": id.to_string(), "partitions": partitions})
                );
            } else {
                say!("created topic {topic} ({id}) with {partitions} partition(s)");
            }
            Ok(ExitCode::SUCCESS)
        }
        TopicCommand::Elect {
            root,
            topic,
            partition,
            json,
        } => {
            let epoch = with_cluster(root, |c| Ok(c.bump_leader_epoch(topic, *partition, 0)?))?;
            if *json {
                say!(
                    "{}",
                    json!({"topic": topic, "partition": partition, "leader_epoch": epoch})
                );
            } else {
                say!("{topic}-{partition}: leader epoch {epoch}");
            }
            Ok(ExitCode::SUCCESS)
        }
        TopicCommand::Alter {
            root,
            topic,
            partitions,
        } => with_cluster(root, |c| match c.create_partitions(topic, *partitions) {
            Ok(()) => {
                say!("{topic}: {partitions} partitions");
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => request_error(e, false),
        }),
        TopicCommand::Config(args) => super::mirror_meta::topic_config(args),
        TopicCommand::Delete { root, topic } => {
            with_cluster(root, |c| Ok(c.delete_topic(topic)?))?;
            say!("deleted topic {topic}");
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn print_topic_results(results: &TopicResults, json: bool) -> std::io::Result<ExitCode> {
    let mut ok = true;
    for (topic, r) in results {
        ok &= r.is_ok();
        let (error, message) = match r {
            Ok(()) => (None, None),
            Err(e) => (
                Some(e.error_name().unwrap_or("UNKNOWN_SERVER_ERROR")),
                Some(e.message()),
            ),
        };
        if json {
            say!(
                "{}",
                json!({"topic": topic, "error": error, "message": message})
            );
        } else {
            match error {
                None => say!("{topic}: ok"),
                Some(name) => say!("{topic}: error {name}: {}", message.unwrap_or_default()),
            }
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// A request that failed as a whole: Kafka's error name when there is one, exit status 1.
fn request_error(e: klog::mirror::Error, json: bool) -> anyhow::Result<ExitCode> {
    match e.error_name() {
        Some(name) => {
            if json {
                say!("{}", json!({"error": name, "message": e.message()}));
            } else {
                super::print_error(Some(name), e.message());
            }
            Ok(ExitCode::from(1))
        }
        None => Err(e.into()),
    }
}

pub fn mirror(cmd: &MirrorCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        MirrorCommand::Create {
            root,
            name,
            source,
            stop_mode,
            configs,
        } => {
            let source = &stored_source(source)?;
            let mode = klog::mirror::StopMode::parse(stop_mode)?;
            let configs: Vec<(String, String)> = super::mirror_meta::mirror_configs(configs)?
                .into_iter()
                .collect();
            with_cluster(root, |c| {
                match c.create_mirror_with(name, source, mode, &configs) {
                    Ok(()) => {
                        say!("created mirror {name} from {source} (stop mode {mode})");
                        Ok(ExitCode::SUCCESS)
                    }
                    Err(e) => request_error(e, false),
                }
            })
        }
        MirrorCommand::Add(a) => topics_request(a, |c| c.add_topics(&a.name, &a.topics)),
        MirrorCommand::Remove(a) => topics_request(a, |c| c.remove_topics(&a.name, &a.topics)),
        MirrorCommand::Pause(a) => topics_request(a, |c| c.pause_topics(&a.name, &a.topics)),
        MirrorCommand::Resume(a) => topics_request(a, |c| c.resume_topics(&a.name, &a.topics)),
        MirrorCommand::Delete { root, name } => {
            with_cluster(root, |c| match c.delete_mirror(name) {
                Ok(()) => {
                    say!("deleted mirror {name}");
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => request_error(e, false),
            })
        }
        MirrorCommand::Retry {
            root,
            name,
            topics,
            json,
        } => with_cluster(root, |c| match c.retry_topics(name, topics) {
            Ok(results) => Ok(print_retry_results(&results, *json)?),
            Err(e) => request_error(e, *json),
        }),
        MirrorCommand::Run(args) => run(args),
        MirrorCommand::Describe { root, json, acls } => {
            let (mirrors, rows, configs, bindings) = with_reader(root, |cluster| {
                let rows = cluster.describe_live();
                Ok((
                    cluster.describe_mirrors(&rows),
                    rows,
                    cluster.describe_configs(),
                    acls.then(|| cluster.describe_acls()),
                ))
            })?;
            if *json {
                let mut out = json!({ "mirrors": mirrors, "partitions": rows, "configs": configs });
                if let Some(b) = bindings {
                    out["acls"] = json!(b);
                }
                say!("{out}");
            } else {
                print_describe(&rows, false)?;
                if !mirrors.is_empty() {
                    say!("");
                    super::mirror_meta::print_mirrors(&mirrors);
                }
                if !configs.is_empty() {
                    say!("");
                    super::mirror_meta::print_configs(&configs);
                }
                if let Some(b) = bindings {
                    say!("");
                    super::mirror_meta::print_acls(&b);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A local source as it is stored: its canonical absolute path, so `mirror run` finds it from any
/// working directory. A `kafka://` source is kept as given.
fn stored_source(source: &str) -> anyhow::Result<String> {
    if source.starts_with(klog::mirror::kafka_source::KAFKA_SCHEME) {
        return Ok(source.to_owned());
    }
    let path = std::fs::canonicalize(source).with_context(|| {
        format!("--source {source}: not a directory here (a cluster root, or kafka://host:port)")
    })?;
    path.to_str()
        .map(str::to_owned)
        .with_context(|| format!("--source {}: the path is not UTF-8", path.display()))
}

/// `retry`'s lines: `TOPIC: ok (partitions P, ... reset)` or `TOPIC: error NAME: message`; `--json`
/// adds `"partitions": [P, ...]` to the topic result object.
fn print_retry_results(
    results: &klog::mirror::cluster::RetryResults,
    json: bool,
) -> std::io::Result<ExitCode> {
    let mut ok = true;
    for (topic, r) in results {
        ok &= r.is_ok();
        match r {
            Ok(partitions) if json => say!(
                "{}",
                json!({"topic": topic, "error": null, "message": null, "partitions": partitions})
            ),
            Ok(partitions) if partitions.is_empty() => say!("{topic}: ok (no FAILED partition)"),
            Ok(partitions) => {
                let list: Vec<String> = partitions.iter().map(i32::to_string).collect();
                say!("{topic}: ok (partitions {} reset)", list.join(", "));
            }
            Err(e) => {
                let name = e.error_name().unwrap_or("UNKNOWN_SERVER_ERROR");
                if json {
                    say!(
                        "{}",
                        json!({"topic": topic, "error": name, "message": e.message(), "partitions": null})
                    );
                } else {
                    say!("{topic}: error {name}: {}", e.message());
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

fn topics_request(
    a: &TopicsArgs,
    f: impl FnOnce(&Cluster) -> Result<TopicResults, klog::mirror::Error>,
) -> anyhow::Result<ExitCode> {
    with_cluster(&a.root, |c| match f(c) {
        Ok(results) => Ok(print_topic_results(&results, a.json)?),
        Err(e) => request_error(e, a.json),
    })
}

pub fn print_describe(
    rows: &[klog::mirror::PartitionDescription],
    json: bool,
) -> std::io::Result<()> {
    if json {
        say!("{}", json!({ "partitions": rows }));
        return Ok(());
    }
    say!(
        "{:<24} {:>4} {:<12} {:<10} {:>6} {:>10} {:>10} {:>8} {:>5}",
        "TOPIC",
        "PART",
        "MIRROR",
        "STATE",
        "EPOCH",
        "SOURCE-END",
        "LOCAL-END",
        "LAG",
        "LME"
    );
    let opt = |v: Option<i64>| v.map_or("-".to_owned(), |v| v.to_string());
    let now_ms = SystemClock.now_ms();
    for r in rows {
        say!(
            "{:<24} {:>4} {:<12} {:<10} {:>6} {:>10} {:>10} {:>8} {:>5}{}",
            r.topic,
            r.partition,
            r.mirror.as_deref().unwrap_or("-"),
            r.state.map_or("-", |s| s.name()),
            r.leader_epoch,
            opt(r.source_end_offset),
            r.log_end_offset,
            opt(r.lag),
            opt(r.last_mirrored_epoch.map(i64::from)),
            failure_note(r, now_ms)
        );
    }
    let mut modes: Vec<(&str, klog::mirror::StopMode)> = rows
        .iter()
        .filter_map(|r| Some((r.mirror.as_deref()?, r.stop_mode?)))
        .collect();
    modes.dedup();
    modes.sort();
    modes.dedup();
    for (mirror, mode) in modes {
        say!("mirror {mirror}: stop mode {mode}");
    }
    Ok(())
}

/// Why a partition failed and when it is retried, after its row: `  (FAILED in STATE, attempt N,
/// retry in S s: error)`; `retry on resume` while paused; `not retried (klog mirror retry resets it)`.
fn failure_note(r: &klog::mirror::PartitionDescription, now_ms: i64) -> String {
    let Some(error) = r.error.as_deref() else {
        return String::new();
    };
    let Some(failed_in) = r.failed_state else {
        return format!("  ({error})");
    };
    let when = match (r.next_retry_ms, r.desired) {
        (None, _) => "not retried (`klog mirror retry` or `resume` resets it)".to_owned(),
        (Some(_), Some(klog::mirror::DesiredState::Pause)) => "retry on resume".to_owned(),
        (Some(t), _) if t <= now_ms => "retry at the next pass".to_owned(),
        (Some(t), _) => format!("retry in {:.1} s", (t - now_ms) as f64 / 1000.0),
    };
    format!(
        "  (FAILED in {failed_in}, attempt {}, {when}: {error})",
        r.retry_attempt.unwrap_or(0)
    )
}

fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let cluster = open(&args.root)?;
    let started = Instant::now();
    let deadline = args.timeout.map(Duration::from_secs_f64);
    let (mut ticks, mut batches, mut bytes, mut truncations) = (0u64, 0u64, 0u64, 0u64);
    let mut errors = 0u64;
    let mut offsets = 0u64;
    let lag_interval = Duration::try_from_secs_f64(args.lag_interval).with_context(|| {
        format!(
            "--lag-interval {}: not a number of seconds",
            args.lag_interval
        )
    })?;
    let mut lag_printed = Instant::now();
    // SIGTERM/SIGINT end the run like a timeout: the pass in progress finishes, then a clean close.
    super::shutdown::install()?;
    loop {
        let r = cluster.tick();
        ticks += 1;
        batches += r.batches_appended;
        bytes += r.bytes_appended;
        truncations += r.truncations;
        for (topic, p, from, to) in &r.transitions {
            if args.json {
                say!(
                    "{}",
                    json!({"event": "transition", "topic": topic, "partition": p, "from": from.name(), "to": to.name()})
                );
            } else {
                say!("{topic}-{p}: {from} -> {to}");
            }
        }
        offsets += r.offsets_synced;
        for c in &r.offset_clamps {
            if args.json {
                say!(
                    "{}",
                    json!({"event": "offset_clamped", "group": c.group, "topic": c.topic, "partition": c.partition,
                           "source_offset": c.source_offset, "synced_offset": c.synced_offset})
                );
            } else {
                say!(
                    "group {}: {}-{} committed {} at the source, clamped to {} (the local log's start or end)",
                    c.group,
                    c.topic,
                    c.partition,
                    c.source_offset,
                    c.synced_offset
                );
            }
        }
        for (topic, p, e) in &r.errors {
            errors += 1;
            if args.json {
                say!(
                    "{}",
                    json!({"event": "error", "topic": topic, "partition": p, "message": e})
                );
            } else {
                super::print_error(None, format_args!("{topic}-{p}: {e}"));
            }
        }
        for c in &r.cleaned {
            print_cleaned(c, args.json);
        }
        if lag_printed.elapsed() >= lag_interval {
            lag_printed = Instant::now();
            print_lag(&cluster, args.json);
        }
        let timed_out = deadline.is_some_and(|d| started.elapsed() >= d);
        if timed_out || (args.until_idle && !r.progressed()) {
            break;
        }
        if let Some(signal) = super::shutdown::requested() {
            errln!("klog: mirror run: signal {signal}: closing cleanly");
            break;
        }
        if !r.progressed() {
            // Short naps so a signal is answered within a tenth of a second.
            for _ in 0..10 {
                if super::shutdown::requested().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    let rows = cluster.describe();
    let mirrors = cluster.describe_mirrors(&rows);
    cluster.close()?;
    let elapsed = started.elapsed().as_secs_f64();
    if args.json {
        say!(
            "{}",
            json!({"event": "summary", "ticks": ticks, "batches": batches, "bytes": bytes,
                   "truncations": truncations, "errors": errors, "offsets_synced": offsets, "seconds": elapsed,
                   "mirrors": mirrors, "partitions": rows})
        );
    } else {
        say!(
            "{ticks} passes, {batches} batches ({bytes} bytes) mirrored, {truncations} truncations, {offsets} group offsets synced, {errors} errors in {elapsed:.2} s"
        );
        print_describe(&rows, false)?;
        for m in &mirrors {
            say!("{}", lag_line(m));
        }
    }
    // Stopped by a signal: closed cleanly, but the run did not end by itself (`docs/cli.md`, Signals).
    Ok(super::shutdown::requested().map_or(ExitCode::SUCCESS, super::shutdown::exit_code))
}

/// `mirror run`'s line for a pass of the background cleaner (a failed one is an error line already).
fn print_cleaned(c: &klog::mirror::CleanedSummary, json: bool) {
    if json {
        say!(
            "{}",
            json!({"event": "cleaned", "topic": c.topic, "partition": c.partition, "cleaned": c.cleaned,
                   "bytes_before": c.bytes_before, "bytes_after": c.bytes_after,
                   "end_offset": c.end_offset, "error": c.error})
        );
    } else if c.error.is_none() {
        say!(
            "{}-{}: cleaned, {} -> {} bytes (cleaner checkpoint {})",
            c.topic,
            c.partition,
            c.bytes_before,
            c.bytes_after,
            c.end_offset
        );
    }
}

/// `mirror run`'s periodic line per mirror: its lag as the fetcher last saw the sources' high
/// watermarks (`{"event": "lag", ...}` with `--json`).
fn print_lag(cluster: &Cluster, json: bool) {
    let rows = cluster.describe();
    for m in cluster.describe_mirrors(&rows) {
        if json {
            let partitions: Vec<_> = rows
                .iter()
                .filter(|r| r.mirror.as_deref() == Some(m.mirror.as_str()))
                .map(|r| json!({"topic": r.topic, "partition": r.partition, "lag": r.lag}))
                .collect();
            say!(
                "{}",
                json!({"event": "lag", "mirror": m.mirror, "lag": m.lag,
                       "max_partition_lag": m.max_partition_lag, "partitions": partitions})
            );
        } else {
            say!("{}", lag_line(&m));
        }
    }
}

/// `mirror m: lag 12 (max 7 in one partition, 3 partitions, 1 not known yet)`.
fn lag_line(m: &klog::mirror::MirrorDescription) -> String {
    let lag = m.lag.map_or("not known".to_owned(), |l| l.to_string());
    let max = m
        .max_partition_lag
        .map_or(String::new(), |l| format!("max {l} in one partition, "));
    let unknown = match m.partitions_without_lag {
        0 => String::new(),
        n => format!(", {n} not known yet"),
    };
    format!(
        "mirror {}: lag {lag} ({max}{} partitions{unknown})",
        m.mirror, m.partitions
    )
}
