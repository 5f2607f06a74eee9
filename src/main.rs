//! The `klog` command line: see `docs/cli.md` for every command and its JSON output (a contract).

mod cli;

use std::process::ExitCode;

use clap::Parser;

/// The library crates' events on stderr: `RUST_LOG` when set, otherwise the level `-v`s ask for (none: off).
fn init_tracing(verbose: u8) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let level = match verbose {
        0 => "off",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.is_empty() => EnvFilter::new(spec),
        _ => EnvFilter::new(level),
    };
    // A write error on stderr is dropped by the subscriber, never a panic.
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    init_tracing(args.verbose);
    let code = match cli::run(args) {
        Ok(code) => code,
        // The reader of our output went away (`klog ... | head`): stop quietly, as a pipe-friendly tool does.
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            ExitCode::SUCCESS
        }
        Err(e) => {
            let name = kafka_error_name(&e);
            let mut text = error_text(&e);
            if let Some(name) = name {
                // The named error's own text starts with its name: said once, first, by print_error.
                text = text.replacen(&format!("{name}: "), "", 1);
            }
            cli::print_error(name, text);
            ExitCode::from(2)
        }
    };
    // Output lost to a failing stdout (a full disk, not a reader that went away) fails the command.
    if let Some(e) = cli::stdout_error() {
        cli::print_error(None, format_args!("writing to stdout: {e}"));
        return ExitCode::from(2);
    }
    code
}

/// The Kafka error a refusal somewhere in the chain names (`OFFSET_OUT_OF_RANGE`, `UNKNOWN_MIRROR`).
fn kafka_error_name(e: &anyhow::Error) -> Option<&'static str> {
    e.chain().find_map(|cause| {
        if let Some(e) = cause.downcast_ref::<klog::mirror::Error>() {
            return e.error_name();
        }
        match cause.downcast_ref::<klog::log::Error>() {
            Some(e @ klog::log::Error::Rejected { .. }) => Some(e.kafka_error().name()),
            _ => None,
        }
    })
}

/// The error and its causes, `: `-separated, each cause once: an error whose text already ends with its
/// cause's (`path: {source}` with `#[source]`, as the crates' `Io` errors are) is not followed by it again.
fn error_text(e: &anyhow::Error) -> String {
    let mut text = e.to_string();
    for cause in e.chain().skip(1) {
        let cause = cause.to_string();
        if !text.ends_with(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}
