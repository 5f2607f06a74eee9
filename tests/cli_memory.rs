//! Memory bounded by the request, not by the data (issue #12, item 10): `klog read`, `dump` and `verify`
//! of a large segment, each run as its own process, with its peak RSS taken from the kernel (`wait4`'s
//! `ru_maxrss`, the child's VmHWM). The limits are generous; they fail only a tool that holds the segment.

mod common;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use common::scratch_dir;
use klog::log::format::{BatchBuilder, Compression};

const MIB: u64 = 1 << 20;
/// Large enough that a tool holding the segment fails every limit below, small enough to write in a
/// second or two.
const SEGMENT_BYTES: u64 = 512 * MIB;
const RECORDS_PER_BATCH: i64 = 1000;

/// A log directory of two partitions holding the same large segment: in `big-0` it is the active
/// segment (read by pread), in `big-1` it is sealed (read through its map) and a one-batch segment follows.
struct Big {
    active: PathBuf,
    sealed: PathBuf,
    batches: i64,
}

fn big() -> &'static Big {
    static BUILT: OnceLock<Big> = OnceLock::new();
    BUILT.get_or_init(|| {
        let root = scratch_dir("cli-memory");
        let (active, sealed) = (root.join("big-0"), root.join("big-1"));
        let batches = write_big_segment(&active);
        write_big_segment(&sealed);
        let leo = batches * RECORDS_PER_BATCH;
        let mut tail = BatchBuilder::new(Compression::None).base_offset(leo);
        tail.append(1_700_000_001_000, Some(b"key"), Some(b"tail"), &[])
            .unwrap();
        std::fs::write(sealed.join(format!("{leo:020}.log")), tail.build().unwrap()).unwrap();
        // Indexes, a producer snapshot at the log end and the checkpoints, as a cleanly closed log has
        // them; and the clean-shutdown marker, so an open rescans nothing.
        let out = common::klog(&["recover", root.to_str().unwrap()]);
        assert!(out.status.success(), "{}", common::stderr(&out));
        std::fs::write(
            root.join(".kafka_cleanshutdown"),
            r#"{"version":0,"brokerEpoch":-1}"#,
        )
        .unwrap();
        std::fs::write(
            root.join("replication-offset-checkpoint"),
            format!("0\n2\nbig 0 {leo}\nbig 1 {}\n", leo + 1),
        )
        .unwrap();
        Big {
            active,
            sealed,
            batches,
        }
    })
}

/// One ~1 MiB batch written again and again with its base offset moved on (the base offset is outside
/// the CRC, so every copy is a valid batch) as `dir`'s first segment. Returns the number of batches.
fn write_big_segment(dir: &Path) -> i64 {
    std::fs::create_dir_all(dir).unwrap();
    let mut b = BatchBuilder::new(Compression::None);
    let value = vec![b'v'; 1000];
    for i in 0..RECORDS_PER_BATCH {
        b.append(1_700_000_000_000 + i, Some(b"key"), Some(&value), &[])
            .unwrap();
    }
    let mut batch = b.build().unwrap();
    let batches = (SEGMENT_BYTES / batch.len() as u64) as i64;
    let mut log = BufWriter::with_capacity(
        8 << 20,
        File::create(dir.join("00000000000000000000.log")).unwrap(),
    );
    for i in 0..batches {
        batch[0..8].copy_from_slice(&(i * RECORDS_PER_BATCH).to_be_bytes());
        log.write_all(&batch).unwrap();
    }
    log.into_inner().unwrap().sync_all().unwrap();
    batches
}

/// What a finished child left: its exit code, its peak resident set and the bytes it read through
/// `read`/`pread` (`rchar`: a map's pages are in the RSS instead), and its output.
struct Run {
    code: Option<i32>,
    peak_rss: u64,
    bytes_read: u64,
    stdout: String,
    stderr: String,
}

/// Runs `klog args`, stdout and stderr into files (a child never blocks on a full pipe), and reaps it with
/// `wait4` to read its own peak RSS (RUSAGE_CHILDREN would mix in every other test's children).
fn klog_measured(name: &str, args: &[&str]) -> Run {
    let dir = scratch_dir(&format!("cli-memory-out-{name}"));
    let (out_path, err_path) = (dir.join("stdout"), dir.join("stderr"));
    let child = Command::new(env!("CARGO_BIN_EXE_klog"))
        .args(args)
        .stdout(Stdio::from(File::create(&out_path).unwrap()))
        .stderr(Stdio::from(File::create(&err_path).unwrap()))
        .spawn()
        .expect("the klog binary runs");
    let pid = child.id() as libc::pid_t;
    // Wait for the exit but leave the zombie: its /proc/<pid>/io still holds what it read.
    // SAFETY: an all-zero `siginfo_t` is a valid value of that plain C struct.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child; `info` is valid for writes.
    let waited = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT,
        )
    };
    assert_eq!(waited, 0, "waitid: {}", std::io::Error::last_os_error());
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    let bytes_read = io
        .lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .and_then(|n| n.trim().parse().ok())
        .expect("rchar in /proc/<pid>/io");
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value of that plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own unreaped child; `status` and `usage` are valid for writes.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4: {}", std::io::Error::last_os_error());
    std::mem::forget(child); // reaped above: `Child` must not wait for it again
    Run {
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        peak_rss: usage.ru_maxrss as u64 * 1024,
        bytes_read,
        stdout: std::fs::read_to_string(out_path).unwrap(),
        stderr: std::fs::read_to_string(err_path).unwrap(),
    }
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn read_of_a_few_bytes_holds_a_few_mib() {
    let big = big();
    let offset = (big.batches / 2 * RECORDS_PER_BATCH + 7).to_string();
    for (name, dir) in [("active", &big.active), ("sealed", &big.sealed)] {
        let run = klog_measured(
            &format!("read-{name}"),
            &[
                "read",
                path(dir),
                "--offset",
                &offset,
                "--max-bytes",
                "1000",
            ],
        );
        assert_eq!(run.code, Some(0), "{name}: {}", run.stderr);
        // At least one whole batch, as Kafka returns, and only that one.
        assert_eq!(
            run.stdout.matches("baseOffset: ").count(),
            1,
            "{name}: {}",
            run.stdout
        );
        assert!(
            run.peak_rss < 64 * MIB,
            "klog read --max-bytes 1000 of a {} MiB {name} segment peaked at {} MiB",
            SEGMENT_BYTES / MIB,
            run.peak_rss / MIB
        );
        assert!(
            run.bytes_read < 16 * MIB,
            "klog read --max-bytes 1000 of a {} MiB {name} segment read {} MiB",
            SEGMENT_BYTES / MIB,
            run.bytes_read / MIB
        );
    }
}

#[test]
fn dump_of_a_segment_streams() {
    let big = big();
    let (dir, batches) = (&big.active, &big.batches);
    let log = dir.join("00000000000000000000.log");
    let run = klog_measured("dump", &["dump", path(&log)]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        run.stdout.matches("baseOffset: ").count() as i64,
        *batches,
        "every batch is printed"
    );
    assert!(
        run.peak_rss < 256 * MIB,
        "klog dump of a {} MiB segment peaked at {} MiB",
        SEGMENT_BYTES / MIB,
        run.peak_rss / MIB
    );
    assert!(
        run.bytes_read < SEGMENT_BYTES + 16 * MIB,
        "klog dump reads the segment once, not {} MiB",
        run.bytes_read / MIB
    );
}

#[test]
fn dump_of_the_indexes_streams() {
    let big = big();
    let (dir, batches) = (&big.active, big.batches);
    for (name, lines) in [
        ("00000000000000000000.index", batches - 1),
        ("00000000000000000000.timeindex", 1),
    ] {
        let run = klog_measured(name, &["dump", path(&dir.join(name))]);
        assert_eq!(run.code, Some(0), "{name}: {}", run.stderr);
        assert_eq!(
            run.stdout
                .lines()
                .filter(|l| l.starts_with("offset: ") || l.starts_with("timestamp: "))
                .count() as i64,
            lines,
            "{name}: {}",
            run.stdout
        );
        assert!(
            run.peak_rss < 64 * MIB,
            "klog dump {name} beside a {} MiB segment peaked at {} MiB",
            SEGMENT_BYTES / MIB,
            run.peak_rss / MIB
        );
    }
}

#[test]
fn verify_of_a_segment_streams() {
    let big = big();
    for (name, dir) in [("active", &big.active), ("sealed", &big.sealed)] {
        let run = klog_measured(&format!("verify-{name}"), &["verify", path(dir)]);
        assert_eq!(run.code, Some(0), "{name}: {}{}", run.stdout, run.stderr);
        assert!(
            run.peak_rss < 256 * MIB,
            "klog verify of a {} MiB {name} segment peaked at {} MiB",
            SEGMENT_BYTES / MIB,
            run.peak_rss / MIB
        );
        // Linear: the segment is read once (plus its small index files), whatever the checks.
        assert!(
            run.bytes_read < SEGMENT_BYTES + 16 * MIB,
            "klog verify reads the {name} segment once, not {} MiB",
            run.bytes_read / MIB
        );
    }
}
