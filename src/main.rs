//! The `klog` command line: see `docs/cli.md` for every command and its JSON output (a contract).

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("klog: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
