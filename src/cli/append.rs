//! `klog append DIR FILE`: appends the concatenated batches in FILE to the partition directory DIR (its
//! parent is the log directory whose checkpoints are read and updated), one batch per append as a
//! producer sends them (`--as leader`, the default) or as a follower would (`--as follower`).
//!
//! When the log directory is a klog cluster (`klog cluster init`), the partition must exist, leader
//! appends are stamped with the partition's leader epoch from the cluster metadata, and a mirror
//! partition refuses them with READ_ONLY_TOPIC unless its mirror state is STOPPED.

use std::io::Write;
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, ValueEnum};
use klog::log::clock::SystemClock;
use klog::log::config::LogConfig;
use klog::log::format::{AnyBatch, BatchStream};
use klog::log::io::{IoWorkload, StdStorage};
use klog::log::log_dir::LogDir;
use klog::log::partition_log::{parse_dir_name, partition_dir_name, LogAppendInfo, PartitionLog};
use klog::log::validator::AppendOrigin;
use klog::mirror::Cluster;
use serde_json::json;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Role {
    /// A producer's append: batches validated, offsets assigned from the log end, the epoch stamped.
    Leader,
    /// A replica's append: batches kept as they are (offsets, epochs), in order after the log end.
    Follower,
}

#[derive(Debug, Args)]
pub struct AppendArgs {
    /// The partition directory, `<log dir>/<topic>-<partition>` (created if missing).
    dir: PathBuf,
    /// A file of concatenated record batches.
    file: PathBuf,
    /// Append as the partition's leader (a produce) or as a follower (replicated batches).
    #[arg(long = "as", value_enum, default_value = "leader")]
    role: Role,
    /// The leader epoch stamped on leader appends (in a cluster, the partition's own epoch is used).
    #[arg(long, default_value_t = 0)]
    leader_epoch: i32,
    /// A topic configuration, `key=value` with Kafka's names (repeatable).
    #[arg(long = "config", value_name = "KEY=VALUE")]
    configs: Vec<String>,
    /// One JSON object per batch.
    #[arg(long)]
    json: bool,
}

/// Splits a partition directory path into (log dir, partition directory name), refusing a name Kafka
/// would refuse before anything is opened or written.
pub fn split_partition_dir(dir: &Path) -> anyhow::Result<(PathBuf, String)> {
    partition_dir_name(dir)?;
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
    // The batches are read through a bounded window as they are appended: memory is one window (or one
    // batch larger than it), never the file.
    let file = std::fs::File::open(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))?;
    let len = file
        .metadata()
        .with_context(|| format!("reading {}", args.file.display()))?
        .len();
    let (root, name) = split_partition_dir(&args.dir)?;
    let mut target = if Cluster::exists(&StdStorage, &root) {
        let cluster = Cluster::open_backend(config.io_backend, Arc::new(SystemClock), &root)?;
        let (topic, partition) = parse_dir_name(&args.dir)
            .with_context(|| format!("{}: not a partition directory", args.dir.display()))?;
        if cluster.log(&topic, partition).is_none() {
            cluster.close()?;
            anyhow::bail!(
                "{}: the cluster has no partition {partition} of topic {topic} (create it with `klog topic create`)",
                args.dir.display()
            );
        }
        Target::Cluster {
            cluster,
            topic,
            partition,
        }
    } else {
        // Each batch flushed as it is appended (`flush.messages=1`) is a durable append; else buffered.
        let workload = if config.flush_messages == 1 {
            IoWorkload::Durable
        } else {
            IoWorkload::Buffered
        };
        let log_dir = LogDir::open_backend_for(config.io_backend, &root, workload)?;
        let (log, _) = log_dir.open_partition(&name, config)?;
        Target::Plain {
            log_dir,
            log: Box::new(log),
        }
    };
    let mut out = super::stdout();
    let mut clean = true;
    // SIGTERM/SIGINT: stop between batches, then flush and close as on success.
    super::shutdown::install()?;
    let mut interrupted = None;
    let mut read_at = |buf: &mut [u8], position: u64| {
        file.read_at(buf, position)
            .map_err(|e| klog::log::Error::Io {
                path: args.file.clone(),
                source: e,
            })
    };
    let tail = BatchStream::default().without_crc().scan::<anyhow::Error>(
        &mut read_at,
        0,
        len,
        &mut |batch| {
            if let Some(signal) = super::shutdown::requested() {
                interrupted = Some(signal);
                return Ok(ControlFlow::Break(()));
            }
            append_batch(args, &mut target, &mut out, &mut clean, batch)
        },
    )?;
    if let Some(tail) =
        tail.filter(|t| *t != klog::log::format::Tail::Clean && interrupted.is_none())
    {
        clean = false;
        let message = format!(
            "{}: data after the last whole batch: {tail}",
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
    target.close()?;
    if let Some(signal) = interrupted {
        errln!(
            "klog: append interrupted by signal {signal}: the batches before it were appended, flushed and closed"
        );
        return Ok(super::shutdown::exit_code(signal));
    }
    Ok(if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Appends one batch of the file (or reports the error that ends the file's batches), printing its
/// line; `Break` once the log has failed.
fn append_batch(
    args: &AppendArgs,
    target: &mut Target,
    out: &mut impl Write,
    clean: &mut bool,
    batch: Result<AnyBatch<'_>, klog::log::Error>,
) -> anyhow::Result<ControlFlow<()>> {
    let (result, position) = match batch {
        Ok(b) => {
            let mut bytes = b.as_bytes().to_vec();
            // Markers and barriers come from the coordinator, not a producer.
            let control = matches!(b, AnyBatch::V2(v) if v.is_control());
            (
                target.append(args.role, control, args.leader_epoch, &mut bytes),
                b.position(),
            )
        }
        Err(e) => (Err(Failure::from_log(&e)), 0),
    };
    let log = target.log_handle();
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
        Err(Failure { name, message }) => {
            *clean = false;
            if args.json {
                writeln!(out, "{}", json!({"error": name, "message": message}))?;
            } else {
                writeln!(
                    out,
                    "error {name} (batch at position {position}): {message}"
                )?;
            }
            if log.is_failed() {
                return Ok(ControlFlow::Break(()));
            }
        }
    }
    Ok(ControlFlow::Continue(()))
}

/// Where the batches go: a bare partition directory, or a partition of a klog cluster.
enum Target {
    Plain {
        log_dir: LogDir,
        log: Box<PartitionLog>,
    },
    Cluster {
        cluster: Cluster,
        topic: String,
        partition: i32,
    },
}

/// A refused append: Kafka's error name and the message.
struct Failure {
    name: &'static str,
    message: String,
}

impl Failure {
    fn from_log(e: &klog::log::Error) -> Self {
        Failure {
            name: e.kafka_error().name(),
            message: e.message(),
        }
    }

    fn from_mirror(e: &klog::mirror::Error) -> Self {
        let name = match e {
            klog::mirror::Error::Log(l) => l.kafka_error().name(),
            other => other.error_name().unwrap_or("UNKNOWN_SERVER_ERROR"),
        };
        Failure {
            name,
            message: e.message(),
        }
    }
}

impl Target {
    fn log_handle(&self) -> LogHandle<'_> {
        match self {
            Target::Plain { log, .. } => LogHandle::Borrowed(log),
            Target::Cluster {
                cluster,
                topic,
                partition,
            } => LogHandle::Shared(cluster.log(topic, *partition).expect("checked at open")),
        }
    }

    fn append(
        &mut self,
        role: Role,
        control: bool,
        leader_epoch: i32,
        bytes: &mut [u8],
    ) -> Result<LogAppendInfo, Failure> {
        match self {
            Target::Plain { log, .. } => match role {
                Role::Leader if control => {
                    log.append_as_leader_with_origin(bytes, leader_epoch, AppendOrigin::Coordinator)
                }
                Role::Leader => log.append_as_leader(bytes, leader_epoch),
                Role::Follower => log.append_as_follower(bytes),
            }
            .map_err(|e| Failure::from_log(&e)),
            Target::Cluster {
                cluster,
                topic,
                partition,
            } => match role {
                Role::Leader if control => cluster.append_markers(topic, *partition, bytes),
                Role::Leader => cluster.produce(topic, *partition, bytes),
                Role::Follower => cluster
                    .log(topic, *partition)
                    .expect("checked at open")
                    .append_as_follower(bytes)
                    .map_err(klog::mirror::Error::from),
            }
            .map_err(|e| Failure::from_mirror(&e)),
        }
    }

    fn close(self) -> anyhow::Result<()> {
        match self {
            Target::Plain { mut log_dir, log } => {
                if !log.is_failed() {
                    log.flush(log.log_end_offset())?;
                    log_dir.close_partition(*log)?;
                    log_dir.close()?;
                }
            }
            Target::Cluster { cluster, .. } => cluster.close()?,
        }
        Ok(())
    }
}

enum LogHandle<'a> {
    Borrowed(&'a PartitionLog),
    Shared(Arc<PartitionLog>),
}

impl std::ops::Deref for LogHandle<'_> {
    type Target = PartitionLog;

    fn deref(&self) -> &PartitionLog {
        match self {
            LogHandle::Borrowed(l) => l,
            LogHandle::Shared(l) => l,
        }
    }
}
