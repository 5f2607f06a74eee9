//! Clean shutdown on SIGTERM and SIGINT for the long-running commands (`mirror run`, `append`, `recover`,
//! `bench`, `torture`): the first signal is a request, polled between steps; the command finishes the step
//! in progress, flushes, writes the checkpoints (and the clean-shutdown marker where it may vouch for the
//! directory) and releases the lock. A second signal ends the process at once (a stuck shutdown must
//! still be stoppable), like Kafka's broker on a second Ctrl-C.
//!
//! One exit rule for all of them: a command a signal stopped exits 128 + the signal (143 for SIGTERM,
//! 130 for SIGINT) after its clean close, whatever it had done by then, so a script can tell a run
//! that was stopped from one that finished (0) or failed (1, 2). A close that fails is an error (2).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use signal_hook::consts::{SIGINT, SIGTERM};

/// The signal that asked for the shutdown (0: none yet).
static SIGNAL: AtomicUsize = AtomicUsize::new(0);
/// Armed by the first signal: the next one exits at once.
static ARMED: AtomicBool = AtomicBool::new(false);

/// Turns SIGTERM and SIGINT into a shutdown request for this process (idempotent).
pub fn install() -> anyhow::Result<()> {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    let mut result = Ok(());
    INSTALLED.call_once(|| {
        for sig in [SIGTERM, SIGINT] {
            // Registration order matters: the exit check runs before the flag is set.
            let armed = signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, &ARMED)
                .and_then(|_| signal_hook::flag::register(sig, &ARMED))
                .and_then(|_| signal_hook::flag::register_usize(sig, &SIGNAL, sig as usize));
            if let Err(e) = armed {
                result = Err(anyhow::anyhow!(
                    "installing the handler of signal {sig}: {e}"
                ));
            }
        }
    });
    result
}

/// The signal number if a shutdown was asked for.
pub fn requested() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s as i32),
    }
}

/// The exit code of a command a signal cut short: 128 + the signal, the shell's convention.
pub fn exit_code(signal: i32) -> std::process::ExitCode {
    std::process::ExitCode::from((128 + signal).clamp(0, 255) as u8)
}
