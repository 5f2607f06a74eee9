//! `klog demo`: the whole story on an embedded default, in a scratch directory removed at the end (also
//! on an error) unless `--keep DIR` names one to write into and leave. Each step prints its heading
//! first, then what it shows (transitions, `group describe` tables) and last what it checked, with its
//! time: a step's detail lines never print before the heading they belong to.
//!
//! 1. A primary cluster takes idempotent batches in every codec and a committed and an aborted
//!    transaction.
//! 2. A second cluster mirrors it (KIP-1279): PREPARING -> MIRRORING, byte-identical segments, read-only.
//! 3. Failover: STOPPING -> STOPPED, the last mirrored epoch recorded, the epoch bumped, the
//!    MIRROR_PID_RESET barrier written; a producer reusing a mirrored producer id starts at sequence 0.
//! 4. A consumer group: it committed on the primary, the mirror carried the commit, and after failover
//!    the group finds the same offset on the new primary and resumes there (`klog group describe`).
//! 5. Failback: the old primary, which took a stray write while cut off, mirrors back and is truncated
//!    by the diverging epoch until it equals the new primary byte for byte.
//! 6. Crash: the new primary stops without a clean shutdown with a torn write at the end of its segment;
//!    opening it again recovers (the torn tail cut, producer state rebuilt) and the mirror state survives.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{ensure, Context};
use klog::log::clock::SystemClock;
use klog::log::format::{BatchBuilder, Compression, ControlRecordType, Header};
use klog::log::io::{open_backend, BackendChoice, IoBackend, IoWorkload, Storage};
use klog::mirror::{Cluster, ClusterOptions, MirrorState};

use super::dump;

pub fn run(keep: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let scratch = Scratch::new(keep)?;
    let code = story(scratch.path())?;
    drop(scratch);
    Ok(code)
}

/// The demo's directory: the one `--keep` named (left in place), or a new one under the temp dir that
/// is removed when this is dropped, at the end or on the way out of an error or a panic.
struct Scratch {
    path: PathBuf,
    keep: bool,
}

impl Scratch {
    fn new(keep: Option<PathBuf>) -> anyhow::Result<Scratch> {
        let scratch = match keep {
            Some(path) => Scratch { path, keep: true },
            None => Scratch {
                path: default_dir()?,
                keep: false,
            },
        };
        std::fs::create_dir_all(&scratch.path)
            .with_context(|| format!("creating {}", scratch.path.display()))?;
        Ok(scratch)
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.keep {
            outln!("kept {}", self.path.display());
        } else if let Err(e) = std::fs::remove_dir_all(&self.path) {
            errln!("klog: warning: {}: not removed: {e}", self.path.display());
        } else {
            outln!(
                "removed {} (--keep DIR keeps the clusters)",
                self.path.display()
            );
        }
    }
}

fn story(dir: &Path) -> anyhow::Result<ExitCode> {
    // Forced std, not `io_backend=auto`: the story compares the two clusters' segment files through
    // std::fs while their logs are open, and io_uring's direct write path keeps an active segment's
    // unaligned tail in memory until a flush, so the files would differ while the logs do not.
    let storage = open_backend(IoBackend::Std)?;
    let (a_root, b_root) = (dir.join("primary"), dir.join("dr"));
    for root in [&a_root, &b_root] {
        BackendChoice::forced(IoBackend::Std, IoWorkload::Durable).log(root);
    }
    outln!("klog demo in {}", dir.display());
    let total = Instant::now();

    let t = heading(
        1,
        "The primary: idempotent batches in every codec, two transactions, a leader election",
    );
    let a = Arc::new(init(&storage, &a_root)?);
    a.create_topic("orders", 1, None, &[])?;
    let now = now_ms()?;
    for (pid, codec) in Compression::ALL.into_iter().enumerate() {
        a.produce("orders", 0, &mut idempotent(pid as i64 + 1, 0, codec, now)?)?;
    }
    for (seq, marker) in [
        (0, ControlRecordType::Commit),
        (3, ControlRecordType::Abort),
    ] {
        a.produce("orders", 0, &mut transactional(4242, seq, marker, now)?)?;
        let mut m = BatchBuilder::end_txn_marker(marker, 4242, 0, 0, now)?.build()?;
        a.append_markers("orders", 0, &mut m)?;
    }
    a.bump_leader_epoch("orders", 0, 0)?;
    a.produce("orders", 0, &mut idempotent(1, 5, Compression::None, now)?)?;
    let a_log = a.log("orders", 0).context("primary partition")?;
    // A consumer group read the first half and committed where it goes on (OffsetCommit).
    let group_at = a_log.log_end_offset() / 2;
    a.commit_offset(GROUP, "orders", 0, group_at)?;
    checked(
        t,
        &format!(
            "primary {}: {} offsets in orders-0 (5 codecs, a committed and an aborted transaction, a \
             leader election), {} producers; group {GROUP} committed offset {group_at}",
            a.cluster_id(),
            a_log.log_end_offset(),
            a_log.producers().len()
        ),
    );

    let t = heading(2, "A second cluster mirrors it (KIP-1279)");
    let b = Arc::new(init(&storage, &b_root)?);
    b.create_mirror("dr-mirror", a_root.to_str().context("utf-8 path")?)?;
    b.connect_source("dr-mirror", Arc::new(a.as_source()));
    for (topic, r) in b.add_topics("dr-mirror", &["orders".to_owned()])? {
        r.with_context(|| format!("adding {topic}"))?;
    }
    let report = b.run_until_idle(1000);
    ensure!(report.errors.is_empty(), "mirroring: {}", errors(&report));
    print_transitions(&report);
    let b_log = b.log("orders", 0).context("mirror partition")?;
    ensure!(
        same_file(&a_root, &b_root, "orders-0/00000000000000000000.log")?,
        "the mirrored segment differs from the source's"
    );
    let carried = group_offset(&b)?;
    ensure!(
        carried == group_at,
        "the mirror carried offset {carried}, not {group_at}"
    );
    let refused = b.produce("orders", 0, &mut idempotent(99, 0, Compression::None, now)?);
    let refused = refused
        .err()
        .and_then(|e| e.error_name())
        .context("a produce to the mirror must be refused")?;
    checked(
        t,
        &format!(
            "mirrored {} batches ({} bytes) to {}: segment byte-identical, leader epochs {}, {} \
             producers rebuilt from the batches; a produce there is refused with {refused}; group \
             {GROUP}'s offset {carried} carried into __consumer_offsets",
            report.batches_appended,
            report.bytes_appended,
            b.cluster_id(),
            b_log
                .leader_epochs()
                .iter()
                .map(|e| format!("{} from offset {}", e.epoch, e.start_offset))
                .collect::<Vec<_>>()
                .join(", "),
            b_log.producers().len(),
        ),
    );

    let t = heading(
        3,
        "Failover: the topic stops mirroring and becomes writable",
    );
    for (topic, r) in b.remove_topics("dr-mirror", &["orders".to_owned()])? {
        r.with_context(|| format!("removing {topic}"))?;
    }
    let report = b.run_until_idle(1000);
    ensure!(report.errors.is_empty(), "failover: {}", errors(&report));
    print_transitions(&report);
    let d = b.describe().into_iter().next().context("describe")?;
    ensure!(
        d.state == Some(MirrorState::Stopped),
        "orders-0 is {}, not STOPPED",
        d.state.map_or("without a mirror state", |s| s.name())
    );
    ensure!(
        b_log.producers().is_empty(),
        "producer state survived the barrier"
    );
    let info = b.produce("orders", 0, &mut idempotent(1, 0, Compression::Zstd, now)?)?;
    checked(
        t,
        &format!(
            "failover: last mirrored epoch {}, leader epoch bumped to {}, MIRROR_PID_RESET at offset {}, \
             producer state cleared; producer 1 (a mirrored id) writes again from sequence 0 at offset {}",
            d.last_mirrored_epoch
                .map_or_else(|| "none".to_owned(), |e| e.to_string()),
            d.leader_epoch,
            info.first_offset - 1,
            info.first_offset
        ),
    );

    let t = heading(4, "The consumer group follows the failover");
    consumer_group(&a, &b, group_at)?;
    checked(
        t,
        &format!(
            "group {GROUP}: offset {group_at} on the new primary as on the old; it resumed there and \
             committed the log end ({})",
            b_log.log_end_offset()
        ),
    );

    let t = heading(5, "Failback: the old primary mirrors the new one");
    let stray = a.produce("orders", 0, &mut idempotent(7, 0, Compression::None, now)?)?;
    a.create_mirror("failback", b_root.to_str().context("utf-8 path")?)?;
    a.connect_source("failback", Arc::new(b.as_source()));
    for (topic, r) in a.add_topics("failback", &["orders".to_owned()])? {
        r.with_context(|| format!("adding {topic}"))?;
    }
    let report = a.run_until_idle(1000);
    ensure!(report.errors.is_empty(), "failback: {}", errors(&report));
    print_transitions(&report);
    ensure!(
        same_file(&a_root, &b_root, "orders-0/00000000000000000000.log")?,
        "after failback the old primary must equal the new one"
    );
    checked(
        t,
        &format!(
            "failback: the old primary's stray write at offset {} was cut ({} truncation), then it \
             copied the barrier and the new writes: both logs byte-identical, {} offsets",
            stray.first_offset,
            report.truncations,
            a_log.log_end_offset()
        ),
    );

    let t = heading(
        6,
        "Crash: a torn write at the end of the new primary's segment, then recovery",
    );
    b.produce("orders", 0, &mut idempotent(8, 0, Compression::Lz4, now)?)?;
    let before = (b_log.log_end_offset(), b_log.producers().len());
    drop((b_log, b));
    a.close()?; // the old primary holds the new one as its source: releasing it releases B uncleanly
    drop((a_log, a));
    let segment = b_root.join("orders-0").join("00000000000000000000.log");
    let mut torn = idempotent(9, 0, Compression::None, now)?;
    torn.truncate(torn.len() / 2);
    append_bytes(&segment, &torn)?;
    let b = Cluster::open(Arc::clone(&storage), Arc::new(SystemClock), &b_root)?;
    let r = b
        .open_reports()
        .iter()
        .find(|r| r.partition == "orders-0")
        .context("report")?;
    let b_log = b.log("orders", 0).context("partition")?;
    ensure!(
        (b_log.log_end_offset(), b_log.producers().len()) == before,
        "recovery changed the log: log end {} with {} producers before, {} with {} after",
        before.0,
        before.1,
        b_log.log_end_offset(),
        b_log.producers().len()
    );
    let state = b.describe().into_iter().next().and_then(|d| d.state);
    checked(
        t,
        &format!(
            "crash with a torn write: recovery scanned {} segment(s), cut {} torn bytes at offset {}, \
             replayed {} batches into producer state ({} barrier); log end {} and {} producers as before; \
             mirror state {}",
            r.segments_scanned,
            r.bytes_truncated,
            r.truncated.first().map_or(-1, |t| t.offset),
            r.batches_replayed,
            r.mirror_pid_resets,
            b_log.log_end_offset(),
            b_log.producers().len(),
            state.map_or("-", |s| s.name())
        ),
    );
    b.close()?;
    let started = heading(
        7,
        "Back into service: the new primary exported for a stock Kafka broker",
    );
    let export = super::demo_export::run(dir, &b_root)?;
    outln!("   start Kafka on it (no format step) with:");
    for line in &export.broker_config {
        outln!("     {line}");
    }
    checked(started, &export.check);
    outln!(
        "done in {}; the new primary's log:",
        millis(total.elapsed())
    );
    outln!();
    dump::run(&dump::DumpArgs::new(vec![segment], false, true))
}

/// The demo's consumer group.
const GROUP: &str = "billing";

/// After failover: the group's offset on the new primary is the one it committed on the old primary;
/// it resumes there (reads to the log end) and commits, shown by `klog group describe` before and after.
fn consumer_group(a: &Cluster, b: &Cluster, group_at: i64) -> anyhow::Result<()> {
    let on_primary = group_offset(a)?;
    let on_dr = group_offset(b)?;
    ensure!(
        on_primary == group_at && on_dr == on_primary,
        "the group's offset: {on_primary} on the primary, {on_dr} on the new primary"
    );
    outln!("   klog group describe (new primary, after failover):");
    super::group::print(&b.describe_groups()?, false);
    let log = b.log("orders", 0).context("partition")?;
    let read = log.read(group_at, 1 << 20, None, true)?;
    ensure!(
        read.next_offset > group_at,
        "the group found nothing to read at {group_at}"
    );
    b.commit_offset(GROUP, "orders", 0, log.log_end_offset())?;
    outln!("   klog group describe (after it resumed at {group_at} and read to the end):");
    super::group::print(&b.describe_groups()?, false);
    Ok(())
}

/// The demo group's committed offset on orders-0.
fn group_offset(c: &Cluster) -> anyhow::Result<i64> {
    let key = (GROUP.to_owned(), "orders".to_owned(), 0);
    c.committed_offsets()?
        .get(&key)
        .map(|c| c.offset)
        .with_context(|| format!("group {GROUP} has no offset in {}", c.root().display()))
}

fn init(storage: &Arc<dyn Storage>, root: &Path) -> anyhow::Result<Cluster> {
    Ok(Cluster::init(
        Arc::clone(storage),
        Arc::new(SystemClock),
        root,
        ClusterOptions::default(),
    )?)
}

/// A step's heading, printed before anything the step prints; its start.
fn heading(n: u32, title: &str) -> Instant {
    outln!("{n}. {title}");
    Instant::now()
}

/// The step's last line: what it checked, and its time.
fn checked(started: Instant, what: &str) {
    outln!("   {what} ({})", millis(started.elapsed()));
}

/// A duration as a person reads it: `11.03 ms`.
fn millis(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// A tick's errors, one `topic-partition: error` each.
fn errors(report: &klog::mirror::TickReport) -> String {
    report
        .errors
        .iter()
        .map(|(topic, p, e)| format!("{topic}-{p}: {e}"))
        .collect::<Vec<_>>()
        .join("; ")
}

fn print_transitions(report: &klog::mirror::TickReport) {
    for (topic, p, from, to) in &report.transitions {
        outln!("   {topic}-{p}: {from} -> {to}");
    }
}

fn same_file(a: &Path, b: &Path, rel: &str) -> anyhow::Result<bool> {
    Ok(std::fs::read(a.join(rel))? == std::fs::read(b.join(rel))?)
}

fn append_bytes(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path)?;
    f.write_all(bytes)?;
    Ok(())
}

fn now_ms() -> anyhow::Result<i64> {
    Ok(SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as i64)
}

fn default_dir() -> anyhow::Result<PathBuf> {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    Ok(std::env::temp_dir().join(format!("klog-demo-{}-{nanos}", std::process::id())))
}

/// Five records from an idempotent producer.
fn idempotent(pid: i64, seq: i32, codec: Compression, now: i64) -> anyhow::Result<Vec<u8>> {
    let mut b = BatchBuilder::new(codec).producer(pid, 0, seq);
    for i in 0..5 {
        let key = format!("k{i}");
        let value = format!("{codec} value {i} ").repeat(8);
        let headers = [Header {
            key: "codec",
            value: Some(codec.name().as_bytes()),
        }];
        b.append(
            now + i,
            Some(key.as_bytes()),
            Some(value.as_bytes()),
            &headers,
        )?;
    }
    Ok(b.build()?)
}

fn transactional(
    pid: i64,
    seq: i32,
    marker: ControlRecordType,
    now: i64,
) -> anyhow::Result<Vec<u8>> {
    let mut txn = BatchBuilder::new(Compression::None)
        .producer(pid, 0, seq)
        .transactional(true);
    for i in 0..3 {
        txn.append(
            now,
            Some(b"txn"),
            Some(format!("{marker} record {i}").as_bytes()),
            &[],
        )?;
    }
    Ok(txn.build()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scratch directory goes when the demo fails part way (an error returned through `?`), with
    /// the clusters it had written; a `--keep` directory stays.
    #[test]
    fn the_scratch_directory_is_removed_on_an_error_and_kept_with_keep() {
        let mut made = None;
        let failed = (|| -> anyhow::Result<()> {
            let scratch = Scratch::new(None)?;
            made = Some(scratch.path().to_owned());
            std::fs::create_dir_all(scratch.path().join("primary").join("orders-0"))?;
            anyhow::bail!("a step failed")
        })();
        assert!(failed.is_err());
        let made = made.expect("the scratch directory was made");
        assert!(!made.exists(), "{} was left behind", made.display());

        let kept = default_dir().unwrap();
        drop(Scratch::new(Some(kept.clone())).unwrap());
        assert!(kept.is_dir(), "--keep {} was removed", kept.display());
        std::fs::remove_dir_all(&kept).unwrap();
    }
}
