//! `klog read` and `klog recover` of a partition whose `.index` files point inside batches (a damaged or
//! foreign index after a clean shutdown): every read returns the batch holding its offset, `recover`
//! rebuilds the indexes whose ends are wrong and says so, and `verify` names what no open rebuilt.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{klog, scratch_dir, stderr, stdout};
use klog::log::config::LogConfig;
use klog::log::format::{BatchBuilder, Compression};
use klog::log::io::StdStorage;
use klog::log::log_dir::LogDir;
use serde_json::Value;

const BATCHES: i64 = 120;
const CONFIG: [&str; 4] = [
    "--config",
    "segment.bytes=8192",
    "--config",
    "index.interval.bytes=256",
];

/// `BATCHES` batches of 2 records (offsets 2i, 2i + 1) in segments of 8 KiB, closed cleanly with the
/// high watermark at the log end.
fn write_log(root: &Path) -> PathBuf {
    let mut log_dir = LogDir::open(Arc::new(StdStorage), root).unwrap();
    let config = LogConfig {
        segment_bytes: 8192,
        index_interval_bytes: 256,
        ..LogConfig::default()
    };
    let (log, _) = log_dir.open_partition("damaged-0", config).unwrap();
    for i in 0..BATCHES {
        let mut b = BatchBuilder::new(Compression::None);
        for r in 0..2 {
            let value = format!("value {i} {r} {}", "x".repeat(40));
            b.append(1_700_000_000_000 + i, None, Some(value.as_bytes()), &[])
                .unwrap();
        }
        log.append_as_leader(&mut b.build().unwrap(), 0).unwrap();
    }
    log.update_high_watermark(log.log_end_offset());
    log_dir.close_partition(log).unwrap();
    log_dir.close().unwrap();
    assert!(root.join(".kafka_cleanshutdown").exists());
    root.join("damaged-0")
}

fn bases(dir: &Path) -> Vec<i64> {
    let mut v: Vec<i64> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| p.file_stem().unwrap().to_str().unwrap().parse().unwrap())
        .collect();
    v.sort_unstable();
    v
}

/// Moves the positions of the `.index` entries `which` picks 7 bytes into their batches; the original.
fn shift(dir: &Path, base: i64, which: impl Fn(usize, usize) -> bool) -> Vec<u8> {
    let path = dir.join(format!("{base:020}.index"));
    let original = std::fs::read(&path).unwrap();
    let n = original.len() / 8;
    assert!(n >= 3, "segment {base}: {n} index entries");
    let mut bytes = original.clone();
    for (i, e) in bytes.chunks_exact_mut(8).enumerate() {
        if which(i, n) {
            let p = i32::from_be_bytes(e[4..8].try_into().unwrap()) + 7;
            e[4..8].copy_from_slice(&p.to_be_bytes());
        }
    }
    std::fs::write(&path, bytes).unwrap();
    original
}

fn read_first_batch(dir: &Path, offset: i64) -> (i64, i64) {
    let out = klog(&[
        "read",
        dir.to_str().unwrap(),
        "--offset",
        &offset.to_string(),
        "--json",
    ]);
    assert!(out.status.success(), "offset {offset}: {}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let first = &v["batches"][0];
    assert!(first.is_object(), "offset {offset}: no batch in {v}");
    (
        first["base_offset"].as_i64().unwrap(),
        first["last_offset"].as_i64().unwrap(),
    )
}

#[test]
fn reads_and_recover_of_indexes_pointing_inside_batches() {
    let root = scratch_dir("cli-index-damage");
    let dir = write_log(&root);
    let all = bases(&dir);
    assert!(all.len() >= 3, "{all:?}");
    let (first, second, active) = (all[0], all[1], *all.last().unwrap());
    let first_index = shift(&dir, first, |_, _| true);
    shift(&dir, second, |i, n| i > 0 && i + 1 < n);
    let active_index = shift(&dir, active, |_, _| true);

    // Offsets across every segment, each inside a batch and at its start.
    for offset in (0..BATCHES * 2).step_by(7) {
        let want = (offset / 2 * 2, offset / 2 * 2 + 1);
        assert_eq!(read_first_batch(&dir, offset), want, "offset {offset}");
    }
    // The reads changed nothing.
    assert_ne!(
        std::fs::read(dir.join(format!("{first:020}.index"))).unwrap(),
        first_index
    );

    let mut args = vec!["recover", root.to_str().unwrap(), "--json"];
    args.extend(CONFIG);
    let out = klog(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_str(stdout(&out).lines().next().unwrap()).unwrap();
    assert_eq!(report["clean_shutdown"], true, "{report}");
    assert_eq!(report["log_end_offset"], BATCHES * 2, "{report}");
    assert_eq!(report["truncated"], serde_json::json!([]), "{report}");
    assert_eq!(
        report["rebuilt_indexes"],
        serde_json::json!([first, active]),
        "{report}"
    );
    assert_eq!(
        std::fs::read(dir.join(format!("{first:020}.index"))).unwrap(),
        first_index
    );
    assert_eq!(
        std::fs::read(dir.join(format!("{active:020}.index"))).unwrap(),
        active_index
    );

    // The entries inside the second segment's index are only walked around: verify names them.
    let out = klog(&["verify", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let second_index = dir
        .join(format!("{second:020}.index"))
        .display()
        .to_string();
    let lines: Vec<String> = stdout(&out).lines().map(str::to_owned).collect();
    assert!(!lines.is_empty());
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with(&second_index) && l.contains("where no batch starts")),
        "{lines:?}"
    );
}
