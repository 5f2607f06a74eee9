//! Command dispatch. Each command is a module; output formats are documented in `docs/cli.md`.

mod append;
mod bench;
mod bench_mirror;
mod demo;
mod dump;
mod dump_meta;
mod mirror;
mod producers;
mod read;
mod recover;
mod shutdown;
mod torture;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "klog",
    version,
    about = "Kafka partition logs, byte for byte in Kafka's format"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build batches in every codec plus control batches, write them, read them back and dump them.
    Demo {
        /// Directory to write into (default: a new directory under the system temp dir).
        #[arg(long)]
        dir: Option<PathBuf>,
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
    /// Append and flush random batches until killed (the real-process kill test's child).
    #[command(hide = true)]
    Torture(torture::TortureArgs),
    /// Measure klog beside the machine's limits (plain pwrite/pread)
    Bench(bench::BenchArgs),
    /// Local clusters: one root directory each (a log directory, cluster.json, __mirror_state).
    #[command(subcommand)]
    Cluster(mirror::ClusterCommand),
    /// Topics of a local cluster.
    #[command(subcommand)]
    Topic(mirror::TopicCommand),
    /// KIP-1279 cluster mirroring between local clusters.
    #[command(subcommand)]
    Mirror(mirror::MirrorCommand),
}

/// Runs a command; `Ok` carries the exit code (non-zero when the input had problems).
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Demo { dir } => demo::run(dir),
        Command::Dump(args) => dump::run(&args),
        Command::Append(args) => append::run(&args),
        Command::Read(args) => read::run(&args),
        Command::Producers(args) => producers::run(&args),
        Command::Recover(args) => recover::recover(&args),
        Command::Verify(args) => recover::verify(&args),
        Command::Torture(args) => torture::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Cluster(cmd) => mirror::cluster(&cmd),
        Command::Topic(cmd) => mirror::topic(&cmd),
        Command::Mirror(cmd) => mirror::mirror(&cmd),
    }
}
