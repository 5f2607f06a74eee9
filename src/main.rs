//! The `klog` command line: see `docs/cli.md` for every command and its JSON output (a contract).

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
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
            cli::write_err(format_args!("klog: error: {e:#}\n"));
            ExitCode::from(2)
        }
    };
    // Output lost to a failing stdout (a full disk, not a reader that went away) fails the command.
    if let Some(e) = cli::stdout_error() {
        cli::write_err(format_args!("klog: error: writing to stdout: {e}\n"));
        return ExitCode::from(2);
    }
    code
}
