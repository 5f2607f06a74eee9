//! The binary never panics (exit 101) on a disk state or an argument: offsets at the ends of the i64
//! range, checkpoints naming offsets outside the log, a reader that closes the pipe early, partition
//! directories with names Kafka refuses, checkpoint files klog cannot parse.

mod common;

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use common::{klog, scratch_dir, stderr, stdout};
use klog::log::checkpoint::{read_offsets, write_clean_shutdown};
use klog::log::config::LogConfig;
use klog::log::format::{BatchBuilder, Compression};
use klog::log::io::StdStorage;
use klog::log::log_dir::LogDir;
use serde_json::Value;

/// A command that ran to its end without a panic: not exit 101, no panic message.
fn assert_no_panic(out: &Output, what: &str) {
    let err = stderr(out);
    assert_ne!(out.status.code(), Some(101), "{what} panicked: {err}");
    assert!(!err.contains("panicked"), "{what} printed a panic: {err}");
}

/// One batch of `records` records starting at `base_offset` (a follower's batch when non-zero).
fn batch(base_offset: i64, records: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None).base_offset(base_offset);
    for i in 0..records {
        b.append(
            1_700_000_000_000 + i as i64,
            Some(b"k"),
            Some(b"value"),
            &[],
        )
        .unwrap();
    }
    let mut out = Vec::new();
    b.build_into(&mut out).unwrap();
    out
}

fn write_batches(path: &Path, batches: &[Vec<u8>]) {
    std::fs::write(path, batches.concat()).unwrap();
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A partition directory `<root>/logs/<name>` holding `batches` leader batches of 2 records.
fn partition_with(root: &Path, name: &str, batches: usize) -> PathBuf {
    let input = root.join(format!("{name}.bin"));
    write_batches(&input, &vec![batch(0, 2); batches]);
    let dir = root.join("logs").join(name);
    let out = klog(&["append", s(&dir), s(&input)]);
    assert!(out.status.success(), "{}", stderr(&out));
    dir
}

fn json(out: &Output) -> Value {
    serde_json::from_str(stdout(out).trim())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}{}", stdout(out), stderr(out)))
}

#[test]
fn follower_batches_at_the_end_of_the_offset_range_are_refused_or_appended() {
    let root = scratch_dir("no-panic-follower-max");
    let dir = root.join("logs/t-0");
    // Ends at i64::MAX - 1: the log end offset is i64::MAX, still representable.
    let fits = root.join("fits.bin");
    write_batches(&fits, &[batch(i64::MAX - 2, 2)]);
    let out = klog(&["append", s(&dir), s(&fits), "--as", "follower", "--json"]);
    assert_no_panic(&out, "append up to i64::MAX - 1");
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(json(&out)["last_offset"], i64::MAX - 1);

    // Each of these would put the log end offset past i64::MAX.
    for (base, records) in [(i64::MAX, 1), (i64::MAX - 1, 2), (i64::MAX, 3)] {
        let dir = root.join(format!("logs/u-{records}"));
        let file = root.join(format!("over-{records}.bin"));
        write_batches(&file, &[batch(base, records)]);
        let out = klog(&["append", s(&dir), s(&file), "--as", "follower", "--json"]);
        assert_no_panic(&out, &format!("append at {base} x {records}"));
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let v = json(&out);
        assert!(v["error"].is_string(), "{v}");
        let out = klog(&["read", s(&dir), "--offset", "0", "--json"]);
        assert_no_panic(&out, "read after a refused append");
        assert_eq!(json(&out)["log_end_offset"], 0, "nothing was written");
    }

    // The log that ends at i64::MAX reads, verifies, recovers and refuses any further append.
    let out = klog(&[
        "read",
        s(&dir),
        "--offset",
        &(i64::MAX - 2).to_string(),
        "--json",
    ]);
    assert_no_panic(&out, "read at i64::MAX - 2");
    let v = json(&out);
    assert_eq!(v["log_end_offset"], i64::MAX);
    assert_eq!(v["batches"][0]["base_offset"], i64::MAX - 2);
    for cmd in ["verify", "recover"] {
        let out = klog(&[cmd, s(&root.join("logs"))]);
        assert_no_panic(&out, cmd);
    }
    let next = root.join("next.bin");
    write_batches(&next, &[batch(0, 1)]);
    let out = klog(&["append", s(&dir), s(&next), "--json"]);
    assert_no_panic(&out, "leader append at i64::MAX");
    assert_eq!(json(&out)["error"], "OFFSET_OUT_OF_RANGE");
}

#[test]
fn offset_arguments_at_the_ends_of_the_range_are_refused() {
    let root = scratch_dir("no-panic-offset-args");
    let dir = partition_with(&root, "t-0", 3);
    for offset in [i64::MIN, -1, i64::MAX, i64::MAX - 1] {
        let out = klog(&["read", s(&dir), &format!("--offset={offset}"), "--json"]);
        assert_no_panic(&out, &format!("read --offset {offset}"));
        assert_eq!(json(&out)["error"], "OFFSET_OUT_OF_RANGE");
    }
    // A read from the middle of a segment with the largest --max-bytes returns the rest of it.
    let max = usize::MAX.to_string();
    let out = klog(&[
        "read",
        s(&dir),
        "--offset",
        "4",
        "--max-bytes",
        &max,
        "--json",
    ]);
    assert_no_panic(&out, "read --max-bytes usize::MAX");
    assert_eq!(json(&out)["next_offset"], 6, "{}", stderr(&out));
}

/// Writes one `<topic> <partition> <offset>` entry into a checkpoint file of `logs`.
fn set_checkpoint(logs: &Path, file: &str, entry: &str) {
    std::fs::write(logs.join(file), format!("0\n1\n{entry}\n")).unwrap();
}

#[test]
fn a_log_start_offset_beyond_the_log_end_starts_the_log_there_as_kafka_does() {
    let root = scratch_dir("no-panic-log-start");
    let dir = partition_with(&root, "t-0", 5); // offsets 0..10
    let logs = root.join("logs");
    set_checkpoint(&logs, "log-start-offset-checkpoint", "t 0 1000");
    // The dry run (a reader) reports every segment the open would delete, with its bytes; nothing goes.
    let log_bytes: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    let out = klog(&["recover", s(&logs), "--dry-run", "--json"]);
    assert_no_panic(&out, "recover --dry-run");
    let r = json(&out);
    let cuts = r["truncated"].as_array().unwrap();
    assert!(!cuts.is_empty(), "{r}");
    assert!(cuts.iter().all(|c| c["reason"]
        .as_str()
        .unwrap()
        .contains("log start offset 1000 is beyond the log end")));
    let reported: u64 = cuts.iter().map(|c| c["bytes"].as_u64().unwrap()).sum();
    assert_eq!(
        (reported, r["bytes_truncated"].as_u64()),
        (log_bytes, Some(log_bytes)),
        "{r}"
    );
    assert_eq!(r["bytes_validated"], 0, "{r}");
    let still: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    assert_eq!(still, log_bytes, "a dry run deletes nothing");
    let out = klog(&["read", s(&dir), "--offset", "1000", "--json"]);
    assert_no_panic(&out, "read");
    let v = json(&out);
    assert_eq!(
        (v["log_start_offset"].as_i64(), v["log_end_offset"].as_i64()),
        (Some(1000), Some(1000)),
        "{v}"
    );
    let out = klog(&["producers", s(&dir), "--json"]);
    assert_no_panic(&out, "producers");
    assert_eq!(json(&out)["log_end_offset"], 1000);
    let input = root.join("more.bin");
    write_batches(&input, &[batch(0, 2)]);
    let out = klog(&["append", s(&dir), s(&input), "--json"]);
    assert_no_panic(&out, "append");
    assert_eq!(json(&out)["base_offset"], 1000, "{}", stderr(&out));
}

#[test]
fn checkpoints_at_the_ends_of_the_range_open_without_a_panic() {
    let root = scratch_dir("no-panic-extreme-checkpoints");
    let dir = partition_with(&root, "t-0", 5);
    let logs = root.join("logs");
    let files = [
        "recovery-point-offset-checkpoint",
        "log-start-offset-checkpoint",
        "replication-offset-checkpoint",
    ];
    for file in files {
        for value in [i64::MIN, -1, i64::MAX] {
            let saved: Vec<_> = files
                .iter()
                .map(|f| std::fs::read(logs.join(f)).ok())
                .collect();
            set_checkpoint(&logs, file, &format!("t 0 {value}"));
            for args in [
                vec!["read", s(&dir), "--offset", "0", "--json"],
                vec!["producers", s(&dir), "--json"],
                vec!["verify", s(&logs)],
                vec!["recover", s(&logs), "--dry-run"],
                vec![
                    "clean",
                    s(&logs),
                    "--dry-run",
                    "--force",
                    "--config",
                    "cleanup.policy=compact",
                ],
            ] {
                let out = klog(&args);
                assert_no_panic(&out, &format!("{args:?} with {file} = {value}"));
            }
            for (f, bytes) in files.iter().zip(saved) {
                match bytes {
                    Some(b) => std::fs::write(logs.join(f), b).unwrap(),
                    None => drop(std::fs::remove_file(logs.join(f))),
                }
            }
        }
    }
}

/// `n` partitions `t-0..t-n` of a log directory, each with a few batches, closed cleanly.
fn many_partitions(logs: &Path, n: i32) -> Vec<String> {
    let log_dir = LogDir::open(Arc::new(StdStorage), logs).unwrap();
    let mut log_dir = log_dir;
    let mut names = Vec::new();
    for p in 0..n {
        let name = format!("t-{p}");
        let (log, _) = log_dir.open_partition(&name, LogConfig::default()).unwrap();
        for _ in 0..3 {
            log.append_as_leader(&mut batch(0, 2), 0).unwrap();
        }
        log.update_high_watermark(log.log_end_offset());
        log_dir.close_partition(log).unwrap();
        names.push(name);
    }
    log_dir.close().unwrap();
    names
}

/// Runs klog with stdout a pipe of one page whose read end is closed after the first line (as `| head -1`).
fn run_into_closed_pipe(args: &[&str]) -> Output {
    run_into_closed_pipe_with(args, false)
}

/// `run_into_closed_pipe`, with stderr into the same pipe when `both` (as `2>&1 | head -1`).
fn run_into_closed_pipe_with(args: &[&str], both: bool) -> Output {
    run_with_closed_pipe(args, if both { Streams::Both } else { Streams::Stdout })
}

/// Which of the child's streams go into the pipe (the others: stderr captured, stdout discarded).
#[derive(PartialEq)]
enum Streams {
    Stdout,
    Both,
    Stderr,
}

fn run_with_closed_pipe(args: &[&str], into: Streams) -> Output {
    let mut fds = [0; 2];
    // Close-on-exec: the child must not inherit the read end, or the pipe never loses its last reader.
    // SAFETY: `fds` is a valid two-element array for pipe2(2) to fill.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: pipe(2) returned two fresh descriptors that nothing else owns.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // The smallest pipe: the output below cannot all fit before the reader goes away.
    // SAFETY: F_SETPIPE_SZ on a pipe descriptor we own.
    unsafe { libc::fcntl(fds[1], libc::F_SETPIPE_SZ, 4096) };
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_klog"));
    let (stdout, stderr) = match into {
        Streams::Stdout => (Stdio::from(write_end), Stdio::piped()),
        Streams::Both => (
            Stdio::from(write_end.try_clone().unwrap()),
            Stdio::from(write_end),
        ),
        Streams::Stderr => (Stdio::null(), Stdio::from(write_end)),
    };
    cmd.args(args).stdout(stdout).stderr(stderr);
    let mut child = cmd.spawn().unwrap();
    drop(cmd); // the parent's copy of the write end
    let mut reader = std::fs::File::from(read_end);
    let mut first = Vec::new();
    let mut byte = [0u8; 1];
    while reader.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
        first.push(byte[0]);
    }
    assert!(!first.is_empty(), "{args:?} printed nothing");
    drop(reader);
    let mut err = Vec::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_end(&mut err).unwrap();
    }
    let status = child.wait().unwrap();
    Output {
        status,
        stdout: first,
        stderr: err,
    }
}

#[test]
fn verify_stops_quietly_when_the_reader_goes_away() {
    let logs = scratch_dir("no-panic-pipe-verify").join("logs");
    many_partitions(&logs, 150);
    for args in [vec!["verify", s(&logs)], vec!["verify", s(&logs), "--json"]] {
        let out = run_into_closed_pipe(&args);
        assert_no_panic(&out, "verify | head -1");
        assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    }
}

#[test]
fn dump_stops_quietly_when_the_reader_goes_away() {
    let root = scratch_dir("no-panic-pipe-dump");
    let dir = partition_with(&root, "t-0", 300);
    let segment = dir.join("00000000000000000000.log");
    let out = run_into_closed_pipe(&["dump", s(&segment), "--deep"]);
    assert_no_panic(&out, "dump | head -1");
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
}

#[test]
fn recover_finishes_every_partition_when_the_reader_goes_away() {
    let logs = scratch_dir("no-panic-pipe-recover").join("logs");
    let names = many_partitions(&logs, 150);
    // Unclean (no marker, no recovery points): every partition is rescanned, so recovery runs while the
    // pipe is closed.
    std::fs::remove_file(logs.join(".kafka_cleanshutdown")).unwrap();
    std::fs::remove_file(logs.join("recovery-point-offset-checkpoint")).unwrap();
    let out = run_into_closed_pipe(&["recover", s(&logs), "--json"]);
    assert_no_panic(&out, "recover | head -1");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(first["clean_shutdown"], false, "{first}");
    assert!(
        first["segments_scanned"].as_u64().unwrap() > 0,
        "nothing rescanned: {first}"
    );
    let points = read_offsets(&StdStorage, &logs.join("recovery-point-offset-checkpoint")).unwrap();
    let hws = read_offsets(&StdStorage, &logs.join("replication-offset-checkpoint")).unwrap();
    for name in &names {
        let p: i32 = name[2..].parse().unwrap();
        let key = ("t".to_owned(), p);
        assert_eq!(points.get(&key), Some(&6), "{name}'s recovery point");
        assert_eq!(hws.get(&key), Some(&6), "{name}'s high watermark");
    }

    // Clean: the marker was there at open, so it is written back once every partition is closed.
    write_clean_shutdown(&StdStorage, &logs, -1).unwrap();
    let out = run_into_closed_pipe(&["recover", s(&logs), "--json"]);
    assert_no_panic(&out, "recover --json | head -1");
    assert!(logs.join(".kafka_cleanshutdown").exists());
    let points = read_offsets(&StdStorage, &logs.join("recovery-point-offset-checkpoint")).unwrap();
    assert_eq!(points.len(), names.len());
}

#[test]
fn a_mirror_state_partition_count_beyond_i32_is_refused() {
    let root = scratch_dir("no-panic-mirror-state-partitions");
    let cluster = root.join("c");
    let out = klog(&[
        "cluster",
        "init",
        s(&cluster),
        "--mirror-state-partitions",
        "4000000000",
    ]);
    assert_no_panic(&out, "cluster init");
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(stderr(&out).contains("1 to 10000"), "{}", stderr(&out));
    // A cluster.json edited to such a count is refused when opened, not divided by later.
    let out = klog(&[
        "cluster",
        "init",
        s(&cluster),
        "--mirror-state-partitions",
        "1",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let meta = cluster.join("cluster.json");
    let text = std::fs::read_to_string(&meta).unwrap();
    let edited = text.replace(
        "\"mirror_state_partitions\": 1,",
        "\"mirror_state_partitions\": 4000000000,",
    );
    assert_ne!(text, edited, "{text}");
    std::fs::write(&meta, edited).unwrap();
    let out = klog(&["mirror", "describe", s(&cluster)]);
    assert_no_panic(&out, "mirror describe");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("mirror_state_partitions"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn recover_with_stderr_into_the_closed_pipe_too_finishes_without_a_panic() {
    let logs = scratch_dir("no-panic-pipe-stderr").join("logs");
    let names = many_partitions(&logs, 20);
    // Each of these is an error line on stderr: far more than the pipe holds.
    for i in 0..150 {
        std::fs::create_dir_all(logs.join(format!("bad topic {i}-0"))).unwrap();
    }
    std::fs::remove_file(logs.join("recovery-point-offset-checkpoint")).unwrap();
    let out = run_into_closed_pipe_with(&["recover", s(&logs)], true);
    assert_eq!(out.status.code(), Some(1), "the illegal directories failed");
    let points = read_offsets(&StdStorage, &logs.join("recovery-point-offset-checkpoint")).unwrap();
    assert_eq!(points.len(), names.len(), "{points:?}");
}

/// A one-record follower batch at `base_offset` with timestamp `ts` (any i64: the header's base and max
/// timestamps are patched and the CRC recomputed, as a broker on the other end could send them).
fn batch_at(base_offset: i64, ts: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None).base_offset(base_offset);
    b.append(0, Some(b"k"), Some(b"v"), &[]).unwrap();
    let mut bytes = b.build().unwrap();
    bytes[27..35].copy_from_slice(&ts.to_be_bytes());
    bytes[35..43].copy_from_slice(&ts.to_be_bytes());
    let crc = crc32c::crc32c(&bytes[21..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    bytes
}

#[test]
fn follower_batches_with_timestamps_at_the_ends_of_the_range_append_and_read() {
    let root = scratch_dir("no-panic-timestamps");
    let dir = root.join("logs/t-0");
    let file = root.join("ts.bin");
    let stamps = [1_700_000_000_000, i64::MIN, i64::MAX, -2, i64::MIN + 1, 0];
    let batches: Vec<Vec<u8>> = stamps
        .iter()
        .enumerate()
        .map(|(i, ts)| batch_at(i as i64, *ts))
        .collect();
    write_batches(&file, &batches);
    let out = klog(&["append", s(&dir), s(&file), "--as", "follower", "--json"]);
    assert_no_panic(&out, "append");
    for args in [
        vec!["read", s(&dir), "--offset", "0", "--json"],
        vec!["verify", s(&dir)],
        vec!["recover", s(&dir)],
        vec!["dump", s(&dir.join("00000000000000000000.timeindex"))],
    ] {
        let out = klog(&args);
        assert_no_panic(&out, &format!("{args:?}"));
    }
}

#[test]
fn dump_with_stderr_into_a_closed_pipe_finishes_without_a_panic() {
    let root = scratch_dir("no-panic-pipe-dump-stderr");
    // Follower batches two offsets apart: every one is a "non-consecutive offsets" line on stderr.
    let batches: Vec<Vec<u8>> = (0..400).map(|i| batch(i * 2, 1)).collect();
    let file = root.join("gaps.bin");
    write_batches(&file, &batches);
    let out = run_with_closed_pipe(&["dump", "--deep", s(&file)], Streams::Stderr);
    assert_ne!(out.status.code(), Some(101), "dump panicked");
}

#[test]
fn a_cleaner_checkpoint_at_the_ends_of_the_range_cleans_without_a_panic() {
    let root = scratch_dir("no-panic-cleaner-checkpoint");
    partition_with(&root, "t-0", 5);
    let logs = root.join("logs");
    for value in [i64::MIN, -1, 3, i64::MAX] {
        set_checkpoint(&logs, "cleaner-offset-checkpoint", &format!("t 0 {value}"));
        for dry_run in [true, false] {
            let mut args = vec!["clean", s(&logs), "--force", "--json"];
            args.extend(["--config", "cleanup.policy=compact", "--now", "1"]);
            if dry_run {
                args.push("--dry-run");
            }
            let out = klog(&args);
            assert_no_panic(&out, &format!("{args:?} with the checkpoint at {value}"));
            assert!(
                out.status.success(),
                "{args:?} at {value}: {}",
                stderr(&out)
            );
        }
    }
}
