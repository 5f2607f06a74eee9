//! Command dispatch. Each command is a module; output formats are documented in `docs/cli.md`.
//!
//! Commands print through [`stdout`] and [`outln!`], never `println!` (which panics when the reader of a
//! pipe went away, `klog ... | head -1`): once stdout is closed further output is dropped and the command
//! finishes its work (`recover` closes every partition and writes the checkpoints); listing commands may
//! ask [`stdout_closed`] and stop early. Every message for stderr goes through `errln!` for the same reason.

/// `println!` over [`stdout`]: a closed pipe drops the line instead of panicking.
macro_rules! outln {
    () => {
        $crate::cli::write_out(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` that never panics: a closed stderr (`klog ... 2>&1 | head -1`) drops the line.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::cli::write_err(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` over [`stdout`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::write_out(format_args!($($arg)*))
    };
}

mod append;
mod bench;
mod bench_mirror;
mod clean;
mod cluster_open;
mod demo;
mod demo_export;
mod dump;
mod dump_coordinator;
mod dump_meta;
mod dump_metadata;
mod export;
mod group;
mod mirror;
mod mirror_import;
mod mirror_meta;
mod producers;
mod read;
mod recover;
mod shutdown;
mod topic_config;
mod topics;
mod torture;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "klog",
    version,
    about = "Kafka partition logs, byte for byte in Kafka's format"
)]
pub struct Cli {
    /// Log what the library does to stderr: -v info (recoveries and what they cut, truncations, retention,
    /// mirror transitions, failover), -vv debug (also opens, rolls, snapshots, source connections),
    /// -vvv trace. `RUST_LOG` (e.g. `klog_mirror=debug`) overrides it.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// The command to run.
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The mirroring story in a scratch directory: a primary cluster, a mirror of it, failover, a
    /// consumer group's offset following it, failback and crash recovery, each step checked and narrated.
    Demo {
        /// Write into DIR and leave it there (default: a new directory under the system temp dir,
        /// removed at the end). `--dir` is an older name for it.
        #[arg(long, value_name = "DIR", alias = "dir")]
        keep: Option<PathBuf>,
    },
    /// Print segment files, batch files, indexes, checkpoints and partition metadata.
    Dump(dump::DumpArgs),
    /// Append the batches of a file to a partition directory (as leader or follower).
    Append(append::AppendArgs),
    /// Read whole batches from a partition directory, as a fetch would.
    Read(read::ReadArgs),
    /// Show the producer state of a partition directory and its last stable offset.
    Producers(producers::ProducersArgs),
    /// Recover log directories (after a crash): cut torn tails, rebuild indexes and producer state; report.
    Recover(recover::RecoverArgs),
    /// Check log directories without changing anything: CRCs, indexes, snapshots, checkpoints.
    Verify(recover::VerifyArgs),
    /// Compact log directories as Kafka's log cleaner does: one pass on every compacted partition.
    Clean(clean::CleanArgs),
    /// The topics, partitions and configs a KRaft metadata log (`__cluster_metadata-0`) states.
    Topics(topics::TopicsArgs),
    /// Append and flush random batches until killed, printing each flushed offset (the real-process kill
    /// test's child).
    Torture(torture::TortureArgs),
    /// Measure klog beside the machine's limits (plain pwrite/pread) and beside Kafka's own code.
    Bench(bench::BenchArgs),
    /// Local clusters: one root directory each (a log directory, cluster.json, __mirror_state).
    #[command(subcommand)]
    Cluster(mirror::ClusterCommand),
    /// Topics of a local cluster.
    #[command(subcommand)]
    Topic(mirror::TopicCommand),
    /// KIP-1279 cluster mirroring into a local cluster, from another local cluster or a Kafka cluster.
    #[command(subcommand)]
    Mirror(mirror::MirrorCommand),
    /// Consumer-group offsets of a local cluster (in __consumer_offsets, as Kafka keeps them).
    #[command(subcommand)]
    Group(group::GroupCommand),
    /// ACL bindings kept in a local cluster's metadata (klog has no authorizer: data for the layer
    /// above it).
    #[command(subcommand)]
    Acl(mirror_meta::AclCommand),
}

/// Runs a command; `Ok` carries the exit code (non-zero when the input had problems).
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Demo { keep } => demo::run(keep),
        Command::Dump(args) => dump::run(&args),
        Command::Append(args) => append::run(&args),
        Command::Read(args) => read::run(&args),
        Command::Producers(args) => producers::run(&args),
        Command::Recover(args) => recover::recover(&args),
        Command::Verify(args) => recover::verify(&args),
        Command::Clean(args) => clean::run(&args),
        Command::Topics(args) => topics::run(&args),
        Command::Torture(args) => torture::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Cluster(cmd) => mirror::cluster(&cmd),
        Command::Topic(cmd) => mirror::topic(&cmd),
        Command::Mirror(cmd) => mirror::mirror(&cmd),
        Command::Group(cmd) => group::run(&cmd),
        Command::Acl(cmd) => mirror_meta::acl(&cmd),
    }
}

/// Whether stdout's reader went away (or writing to it failed): later output is dropped.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
/// The first stdout error other than a closed pipe (a full disk under `> file`), reported by `main`.
static STDOUT_ERROR: Mutex<Option<std::io::Error>> = Mutex::new(None);

/// The process's stdout, locked, that turns a closed pipe into dropped output instead of an error.
pub struct Stdout(std::io::StdoutLock<'static>);

/// Locks stdout for a command's output (see the module docs).
pub fn stdout() -> Stdout {
    Stdout(std::io::stdout().lock())
}

/// Whether the reader of stdout went away (or writing failed): a listing command may stop here.
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Acquire)
}

/// The error that closed stdout, unless it was the reader going away (which is no error).
pub fn stdout_error() -> Option<std::io::Error> {
    STDOUT_ERROR
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
}

impl Stdout {
    /// Runs a write; a failure closes stdout for good and is kept for `main` unless it is EPIPE.
    fn guard<T>(
        &mut self,
        done: T,
        op: impl FnOnce(&mut std::io::StdoutLock<'static>) -> std::io::Result<T>,
    ) -> std::io::Result<T> {
        if stdout_closed() {
            return Ok(done);
        }
        op(&mut self.0).or_else(|e| {
            STDOUT_CLOSED.store(true, Ordering::Release);
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                let mut first = STDOUT_ERROR.lock().unwrap_or_else(|e| e.into_inner());
                first.get_or_insert(e);
            }
            Ok(done)
        })
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.guard(buf.len(), |out| out.write(buf))
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.guard((), |out| out.write_all(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.guard((), |out| out.flush())
    }
}

/// What `outln!` and `out!` call.
pub fn write_out(args: std::fmt::Arguments<'_>) {
    // `Stdout` never returns an error: it keeps it for `main`.
    let _ = stdout().write_fmt(args);
}

/// The one error line of every command (docs/cli.md): `klog: error: WHAT`, WHAT naming the file or
/// directory first when there is one; a refusal Kafka names says the name once, first:
/// `klog: error: NAME: WHAT`. `main` prints a command's failure through it, and commands that report an
/// error and go on (a refused batch, a corrupt file among several) print through it too.
pub fn print_error(name: Option<&str>, what: impl std::fmt::Display) {
    match name {
        Some(name) => write_err(format_args!("klog: error: {name}: {what}\n")),
        None => write_err(format_args!("klog: error: {what}\n")),
    }
}

/// What `errln!` calls. Nothing is left to tell if stderr itself fails, so the error is dropped.
pub fn write_err(args: std::fmt::Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(args);
}
