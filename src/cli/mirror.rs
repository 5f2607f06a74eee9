//! `klog cluster`, `klog topic` and `klog mirror`: local clusters and KIP-1279 mirroring between them.
//! A cluster is one root directory (a Kafka log directory plus `cluster.json`); a mirror's source is
//! another cluster's root. Output formats are in `docs/cli.md`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, Subcommand};
use klog::log::checkpoint::TopicId;
use klog::log::clock::SystemClock;
use klog::log::io::{open_backend, IoBackend, Storage};
use klog::mirror::cluster::TopicResults;
use klog::mirror::{Cluster, ClusterOptions};
use serde_json::json;

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
        root: PathBuf,
        /// Kafka's 22-character base64 cluster id (default: random).
        #[arg(long)]
        cluster_id: Option<String>,
        /// Partitions of `__mirror_state` (mirror.state.topic.num.partitions).
        #[arg(long, default_value_t = 3)]
        mirror_state_partitions: u32,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum TopicCommand {
    /// Create a topic.
    Create {
        root: PathBuf,
        topic: String,
        #[arg(long, default_value_t = 1)]
        partitions: i32,
        /// Keep this topic id (base64), as a mirror does.
        #[arg(long)]
        topic_id: Option<String>,
        /// A topic configuration, `key=value` with Kafka's names (repeatable).
        #[arg(long = "config", value_name = "KEY=VALUE")]
        configs: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// Elect a leader again: the partition's leader epoch goes up by one.
    Elect {
        root: PathBuf,
        topic: String,
        #[arg(long, default_value_t = 0)]
        partition: i32,
        #[arg(long)]
        json: bool,
    },
    /// Delete a topic (its partition directories are renamed `<dir>.<id>-delete`, as Kafka does).
    Delete { root: PathBuf, topic: String },
    /// Grow a topic to more partitions (kafka-topics --alter --partitions).
    Alter {
        root: PathBuf,
        topic: String,
        #[arg(long)]
        partitions: i32,
    },
    /// Set or delete local topic configs (on a mirror topic: overrides of the source's) and print the
    /// configs in force.
    Config(super::mirror_meta::TopicConfigArgs),
}

#[derive(Debug, Subcommand)]
pub enum MirrorCommand {
    /// CreateMirror: NAME copies topics from SOURCE (another cluster's root).
    Create {
        root: PathBuf,
        name: String,
        #[arg(long)]
        source: String,
    },
    /// Start mirroring topics (creating them with the source's id and partition count).
    Add(TopicsArgs),
    /// Fail over: stop mirroring the topics and make them writable here.
    Remove(TopicsArgs),
    Pause(TopicsArgs),
    Resume(TopicsArgs),
    /// DeleteMirror (every topic must be STOPPED).
    Delete {
        root: PathBuf,
        name: String,
    },
    /// Drive the state machine and the fetchers.
    Run(RunArgs),
    /// Per partition: mirror, state, source and local end offsets, lag, last mirrored epoch; then each
    /// topic's configs in force (synced from the source, or local overrides).
    Describe {
        root: PathBuf,
        #[arg(long)]
        json: bool,
        /// Also the ACL bindings: the cluster's own and those each mirror synced.
        #[arg(long)]
        acls: bool,
    },
}

#[derive(Debug, Args)]
pub struct TopicsArgs {
    root: PathBuf,
    name: String,
    #[arg(required = true)]
    topics: Vec<String>,
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
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
}

fn storage() -> anyhow::Result<Arc<dyn Storage>> {
    Ok(open_backend(IoBackend::Std)?)
}

fn open(root: &Path) -> anyhow::Result<Cluster> {
    Cluster::open(storage()?, Arc::new(SystemClock), root)
        .with_context(|| format!("opening cluster {}", root.display()))
}

/// Runs `f` on the open cluster and closes it cleanly whatever `f` returned.
pub(super) fn with_cluster<T>(
    root: &Path,
    f: impl FnOnce(&Cluster) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let cluster = open(root)?;
    let result = f(&cluster);
    let closed = cluster.close();
    let value = result?;
    closed?;
    Ok(value)
}

pub fn cluster(cmd: &ClusterCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ClusterCommand::Init {
            root,
            cluster_id,
            mirror_state_partitions,
            json,
        } => {
            let c = Cluster::init(
                storage()?,
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
                Some(e.to_string()),
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
                say!("{}", json!({"error": name, "message": e.to_string()}));
            } else {
                errln!("klog: error {name}: {e}");
            }
            Ok(ExitCode::from(1))
        }
        None => Err(e.into()),
    }
}

pub fn mirror(cmd: &MirrorCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        MirrorCommand::Create { root, name, source } => {
            with_cluster(root, |c| match c.create_mirror(name, source) {
                Ok(()) => {
                    say!("created mirror {name} from {source}");
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => request_error(e, false),
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
        MirrorCommand::Run(args) => run(args),
        MirrorCommand::Describe { root, json, acls } => {
            // A reader: beside a running `mirror run` (which holds the lock), nothing changed on disk.
            let reader = klog::log::partition_log::read_only_view(storage()?);
            let cluster = Cluster::open(reader, Arc::new(SystemClock), root)
                .with_context(|| format!("opening cluster {}", root.display()))?;
            let rows = cluster.describe_live();
            let configs = cluster.describe_configs();
            let bindings = acls.then(|| cluster.describe_acls());
            cluster.close()?;
            if *json {
                let mut out = json!({ "partitions": rows, "configs": configs });
                if let Some(b) = bindings {
                    out["acls"] = json!(b);
                }
                say!("{out}");
            } else {
                print_describe(&rows, false)?;
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
            r.error
                .as_deref()
                .map(|e| format!("  ({e})"))
                .unwrap_or_default()
        );
    }
    Ok(())
}

fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let cluster = open(&args.root)?;
    let started = Instant::now();
    let deadline = args.timeout.map(Duration::from_secs_f64);
    let (mut ticks, mut batches, mut bytes, mut truncations) = (0u64, 0u64, 0u64, 0u64);
    let mut errors = 0u64;
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
        for (topic, p, e) in &r.errors {
            errors += 1;
            if args.json {
                say!(
                    "{}",
                    json!({"event": "error", "topic": topic, "partition": p, "message": e})
                );
            } else {
                errln!("{topic}-{p}: {e}");
            }
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
    cluster.close()?;
    let elapsed = started.elapsed().as_secs_f64();
    if args.json {
        say!(
            "{}",
            json!({"event": "summary", "ticks": ticks, "batches": batches, "bytes": bytes,
                   "truncations": truncations, "errors": errors, "seconds": elapsed, "partitions": rows})
        );
    } else {
        say!(
            "{ticks} passes, {batches} batches ({bytes} bytes) mirrored, {truncations} truncations, {errors} errors in {elapsed:.2} s"
        );
        print_describe(&rows, false)?;
    }
    Ok(ExitCode::SUCCESS)
}
