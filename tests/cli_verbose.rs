//! `-v`/`-vv` and `RUST_LOG`: the library's tracing events on stderr, and nothing without them.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use common::{scratch_dir, stderr};
use klog::log::config::LogConfig;
use klog::log::format::{BatchBuilder, Compression};
use klog::log::io::StdStorage;
use klog::log::log_dir::LogDir;

/// A log directory left by a writer that stopped without closing, with a torn write after its data.
fn crashed_log_dir(root: &Path) {
    {
        let log_dir = LogDir::open(Arc::new(StdStorage), root).unwrap();
        let (log, _) = log_dir
            .open_partition("events-0", LogConfig::default())
            .unwrap();
        for _ in 0..4 {
            let mut b = BatchBuilder::new(Compression::None);
            b.append(1_700_000_000_000, None, Some(b"event"), &[])
                .unwrap();
            log.append_as_leader(&mut b.build().unwrap(), 0).unwrap();
        }
        log.flush(log.log_end_offset()).unwrap();
    }
    let segment = root.join("events-0/00000000000000000000.log");
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 80, 1]);
    std::fs::write(&segment, bytes).unwrap();
}

fn recover(root: &Path, flags: &[&str], rust_log: Option<&str>) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_klog"));
    cmd.args(flags)
        .arg("recover")
        .arg(root)
        .env_remove("RUST_LOG");
    if let Some(spec) = rust_log {
        cmd.env("RUST_LOG", spec);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    stderr(&out)
}

#[test]
fn verbose_flags_and_rust_log_show_the_library_events_on_stderr() {
    let root = scratch_dir("cli-verbose-quiet");
    crashed_log_dir(&root);
    let quiet = recover(&root, &[], None);
    assert!(!quiet.contains("recovery cut the log"), "{quiet}");

    let root = scratch_dir("cli-verbose-v");
    crashed_log_dir(&root);
    let info = recover(&root, &["-v"], None);
    assert!(
        info.contains("INFO") && info.contains("partition recovered"),
        "{info}"
    );
    assert!(
        info.contains("WARN") && info.contains("recovery cut the log") && info.contains("bytes=13"),
        "{info}"
    );
    assert!(!info.contains("DEBUG"), "-v stops at info: {info}");

    let root = scratch_dir("cli-verbose-vv");
    crashed_log_dir(&root);
    let debug = recover(&root, &["-vv"], None);
    assert!(
        debug.contains("DEBUG") && debug.contains("partition log opened"),
        "{debug}"
    );

    // RUST_LOG wins over the flags: here only klog_log's warnings.
    let root = scratch_dir("cli-verbose-rust-log");
    crashed_log_dir(&root);
    let filtered = recover(&root, &["-vv"], Some("klog_log=warn"));
    assert!(filtered.contains("recovery cut the log"), "{filtered}");
    assert!(
        !filtered.contains("partition recovered") && !filtered.contains("DEBUG"),
        "{filtered}"
    );
}
