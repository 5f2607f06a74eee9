//! Command dispatch. Each command is a module; output formats are documented in `docs/cli.md`.

mod demo;
mod dump;

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
    /// Print the batches of `.log` segment files and `.bin` files of concatenated batches.
    Dump(dump::DumpArgs),
}

/// Runs a command; `Ok` carries the exit code (non-zero when the input had problems).
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Demo { dir } => demo::run(dir),
        Command::Dump(args) => dump::run(&args),
    }
}
