//! A test that cannot run here says why, twice: one line on stderr (which libtest shows only for a
//! failing test, or with `--nocapture`) and, when `KLOG_SKIP_REPORT` names a file (`scripts/test` sets
//! it), the same reason with the test's name appended to that file, which `scripts/test` sums up at
//! the end of the run. Standalone (std only) so the other crates' tests include it by path.

use std::io::Write;

/// Says why this test, or a part of it, does not run here.
pub fn skip(reason: &str) {
    eprintln!("skipping: {reason}");
    let Some(path) = std::env::var_os("KLOG_SKIP_REPORT") else {
        return;
    };
    let thread = std::thread::current();
    let line = format!(
        "{}::{}: {reason}\n",
        env!("CARGO_CRATE_NAME"),
        thread.name().unwrap_or("main")
    );
    // One write of a whole line to a file opened for appending: lines of tests (and test binaries)
    // running at once do not interleave.
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = f.write_all(line.as_bytes());
    }
}
