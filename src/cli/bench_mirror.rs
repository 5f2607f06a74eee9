//! The mirroring benchmark's kernels, shared by `klog bench mirror` and `benches/mirror.rs`:
//! mirror throughput from a source cluster to a destination on the same disk beside the destination's
//! append of the same fetches read beforehand (the bound: the mirror without its fetches; at cluster
//! scale a follower append of every partition's fetched sets), klog's plain leader append of the same
//! batches, and failover time per partition.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use klog::log::clock::{Clock, SystemClock};
use klog::log::format::{BatchBuilder, Compression};
use klog::log::io::Storage;
use klog::mirror::{Cluster, ClusterOptions, MirrorSettings, MirrorState};

/// `count` batches of `records` records of `value_size` random-ish bytes (a producer's 16 KiB batches
/// of 1 KiB records by default), idempotent, one producer per 64 batches, stamped with the time they
/// are built, as a live producer's are. (A fixed stamp years in the past made every failover's barrier,
/// stamped now, roll a new segment in each partition, Kafka's `segment.ms` rule on the batches' own
/// timestamps: a seal, a producer snapshot and three new files per partition that a failover of live
/// data does not pay.)
pub fn build_batches(count: usize, records: usize, value_size: usize) -> Vec<Vec<u8>> {
    let timestamp = SystemClock.now_ms();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut value = vec![0u8; value_size];
    (0..count)
        .map(|i| {
            let pid = 1000 + (i / 64) as i64;
            let seq = ((i % 64) * records) as i32;
            let mut b = BatchBuilder::new(Compression::None).producer(pid, 0, seq);
            for r in 0..records {
                for byte in value.iter_mut() {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    *byte = seed as u8;
                }
                let key = format!("key-{i}-{r}");
                b.append(timestamp, Some(key.as_bytes()), Some(&value), &[])
                    .expect("valid record");
            }
            b.build().expect("valid batch")
        })
        .collect()
}

pub fn new_cluster(
    storage: &Arc<dyn Storage>,
    root: &Path,
    fsync: bool,
) -> anyhow::Result<Cluster> {
    let c = Cluster::init(
        Arc::clone(storage),
        Arc::new(SystemClock),
        root,
        ClusterOptions::default(),
    )?;
    Ok(c.with_settings(MirrorSettings {
        fsync,
        ..MirrorSettings::default()
    }))
}

/// Leader-appends `batches` to a new topic of a new cluster at `root`; returns the cluster and the time
/// the appends took (setup excluded).
pub fn append_run(
    storage: &Arc<dyn Storage>,
    root: &Path,
    topic: &str,
    batches: &[Vec<u8>],
) -> anyhow::Result<(Arc<Cluster>, Duration)> {
    let c = new_cluster(storage, root, true)?;
    c.create_topic(topic, 1, None, &[])?;
    let mut buf = Vec::new();
    let started = Instant::now();
    for b in batches {
        buf.clear();
        buf.extend_from_slice(b);
        c.produce(topic, 0, &mut buf)?;
    }
    Ok((Arc::new(c), started.elapsed()))
}

/// The source's partition 0 of `topic` as the mirror fetches it: `read` calls of the mirror's
/// `fetch_max_bytes` from offset 0 to the log end.
pub fn fetch_chunks(source: &Cluster, topic: &str) -> anyhow::Result<Vec<Vec<u8>>> {
    let log = source
        .log(topic, 0)
        .ok_or_else(|| anyhow::anyhow!("no partition {topic}-0 in the source"))?;
    let max_bytes = MirrorSettings::default().fetch_max_bytes;
    let (mut offset, leo) = (0, log.log_end_offset());
    let mut chunks = Vec::new();
    while offset < leo {
        let info = log.read(offset, max_bytes, None, true)?;
        anyhow::ensure!(
            info.next_offset > offset,
            "the read at {offset} returned nothing before the log end {leo}"
        );
        chunks.push(info.records.as_slice().to_vec());
        offset = info.next_offset;
    }
    Ok(chunks)
}

/// The bound of `mirror_run`: the destination's `append_as_mirror` of `chunks` (the source's fetches,
/// read beforehand) into a new topic of a new cluster at `root`; returns the cluster and the time the
/// appends took (setup excluded).
pub fn mirror_append_run(
    storage: &Arc<dyn Storage>,
    root: &Path,
    topic: &str,
    chunks: &[Vec<u8>],
) -> anyhow::Result<(Arc<Cluster>, Duration)> {
    let c = new_cluster(storage, root, true)?;
    c.create_topic(topic, 1, None, &[])?;
    let log = c
        .log(topic, 0)
        .ok_or_else(|| anyhow::anyhow!("no partition {topic}-0 after creating it"))?;
    let started = Instant::now();
    for chunk in chunks {
        log.append_as_mirror(chunk)?;
    }
    let elapsed = started.elapsed();
    drop(log);
    Ok((Arc::new(c), elapsed))
}

/// Mirrors `topic` from `source` into a new cluster at `root` until it is caught up; returns the time
/// the mirroring took (cluster and topic creation excluded) and the bytes mirrored.
pub fn mirror_run(
    storage: &Arc<dyn Storage>,
    root: &Path,
    source: &Arc<Cluster>,
    topic: &str,
) -> anyhow::Result<(Duration, u64)> {
    let c = new_cluster(storage, root, true)?;
    c.create_mirror("bench", &source.root().display().to_string())?;
    c.connect_source("bench", Arc::new(source.as_source()));
    for (t, r) in c.add_topics("bench", &[topic.to_owned()])? {
        r.map_err(|e| anyhow::anyhow!("{t}: {e}"))?;
    }
    // PREPARING (the LME lookup, two synced state writes) is not part of the copy rate.
    while c.describe()[0].state != Some(MirrorState::Mirroring) {
        let r = c.tick();
        anyhow::ensure!(r.errors.is_empty(), "preparing: {:?}", r.errors);
    }
    let started = Instant::now();
    let report = c.run_until_idle(usize::MAX);
    let elapsed = started.elapsed();
    anyhow::ensure!(report.errors.is_empty(), "mirroring: {:?}", report.errors);
    let (src, dst) = (
        source.log(topic, 0).expect("source partition"),
        c.log(topic, 0).expect("mirror partition"),
    );
    anyhow::ensure!(
        src.log_end_offset() == dst.log_end_offset(),
        "mirror stopped at {} of {}",
        dst.log_end_offset(),
        src.log_end_offset()
    );
    c.close()?;
    Ok((elapsed, report.bytes_appended))
}

/// Failover of `partitions` mirrored partitions (each holding `batches`): the time from the remove
/// request to every partition STOPPED, divided by the partition count.
pub fn failover_run(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    partitions: i32,
    batches: &[Vec<u8>],
    fsync: bool,
) -> anyhow::Result<Duration> {
    let source = Arc::new(new_cluster(storage, &dir.join("fo-source"), true)?);
    source.create_topic("fo", partitions, None, &[])?;
    let mut buf = Vec::new();
    for p in 0..partitions {
        for b in batches {
            buf.clear();
            buf.extend_from_slice(b);
            source.produce("fo", p, &mut buf)?;
        }
    }
    let dest = new_cluster(storage, &dir.join("fo-dest"), fsync)?;
    dest.create_mirror("fo", &source.root().display().to_string())?;
    dest.connect_source("fo", Arc::new(source.as_source()));
    for (t, r) in dest.add_topics("fo", &["fo".to_owned()])? {
        r.map_err(|e| anyhow::anyhow!("{t}: {e}"))?;
    }
    dest.run_until_idle(usize::MAX);
    for (t, r) in dest.remove_topics("fo", &["fo".to_owned()])? {
        r.map_err(|e| anyhow::anyhow!("{t}: {e}"))?;
    }
    let started = Instant::now();
    let report = dest.run_until_idle(usize::MAX);
    let elapsed = started.elapsed();
    anyhow::ensure!(report.errors.is_empty(), "failover: {:?}", report.errors);
    anyhow::ensure!(
        dest.describe()
            .iter()
            .all(|d| d.state == Some(MirrorState::Stopped)),
        "not every partition stopped"
    );
    dest.close()?;
    source.close()?;
    Ok(elapsed / partitions as u32)
}

/// The topics of a cluster of `partitions` partitions: up to 50 partitions per topic (as a real
/// cluster's topics), but at least 20 topics where there are that many partitions, so that a tenth of
/// the topics is a tenth of the partitions for the memory measurement. Names sort in creation order.
pub fn partition_layout(partitions: usize) -> Vec<(String, i32)> {
    let per_topic = (partitions / 20).clamp(1, 50);
    let mut layout = Vec::new();
    let mut left = partitions;
    while left > 0 {
        let n = per_topic.min(left);
        layout.push((format!("m{:05}", layout.len()), n as i32));
        left -= n;
    }
    layout
}

/// Leader-appends `batches` to every partition of `layout` in a new cluster at `root`, round-robin
/// over the partitions (batch 0 of every partition, then batch 1, ...: a producer spreading over
/// partitions); returns the cluster and the time the appends after the first `untimed` rounds took
/// (setup excluded). Every partition gets the same batches, so each producer's sequences start at 0
/// in each partition. A partition's first append writes its leader-epoch checkpoint (synced), once
/// in its life: `untimed` 1 keeps that out of a steady-state rate.
pub fn append_many_run(
    storage: &Arc<dyn Storage>,
    root: &Path,
    layout: &[(String, i32)],
    batches: &[Vec<u8>],
    untimed: usize,
) -> anyhow::Result<(Arc<Cluster>, Duration)> {
    let c = new_cluster(storage, root, true)?;
    for (topic, partitions) in layout {
        c.create_topic(topic, *partitions, None, &[])?;
    }
    let mut buf = Vec::new();
    let untimed = untimed.min(batches.len());
    produce_round_robin(&c, layout, &batches[..untimed], &mut buf)?;
    let started = Instant::now();
    produce_round_robin(&c, layout, &batches[untimed..], &mut buf)?;
    Ok((Arc::new(c), started.elapsed()))
}

fn produce_round_robin(
    c: &Cluster,
    layout: &[(String, i32)],
    batches: &[Vec<u8>],
    buf: &mut Vec<u8>,
) -> anyhow::Result<()> {
    for b in batches {
        for (topic, partitions) in layout {
            for p in 0..*partitions {
                buf.clear();
                buf.extend_from_slice(b);
                c.produce(topic, p, buf)?;
            }
        }
    }
    Ok(())
}

/// One partition's fetched sets, as the mirror's fetcher reads them from the source: its first batch
/// alone (the untimed first tick's fetch, see `first_batches`), then `fetch_max_bytes` sets from there
/// to the log end.
pub struct PartitionSets {
    pub first: Vec<u8>,
    pub rest: Vec<Vec<u8>>,
}

/// Every partition's fetched sets of `layout` in `source`, in layout order (read beforehand: the bound
/// of `mirror_many_run` is the appends without the fetches).
pub fn many_fetch_sets(
    source: &Cluster,
    layout: &[(String, i32)],
) -> anyhow::Result<Vec<PartitionSets>> {
    let max_bytes = MirrorSettings::default().fetch_max_bytes;
    let mut sets = Vec::new();
    for (topic, partitions) in layout {
        for p in 0..*partitions {
            let log = source
                .log(topic, p)
                .ok_or_else(|| anyhow::anyhow!("no partition {topic}-{p} in the source"))?;
            // A limit of 1 byte returns the first batch whole (Kafka's rule: one oversized batch).
            let first = log.read(0, 1, None, true)?;
            let (mut offset, leo) = (first.next_offset, log.log_end_offset());
            let mut rest = Vec::new();
            while offset < leo {
                let info = log.read(offset, max_bytes, None, true)?;
                anyhow::ensure!(
                    info.next_offset > offset,
                    "the read of {topic}-{p} at {offset} returned nothing before the log end {leo}"
                );
                rest.push(info.records.as_slice().to_vec());
                offset = info.next_offset;
            }
            sets.push(PartitionSets {
                first: first.records.as_slice().to_vec(),
                rest,
            });
        }
    }
    Ok(sets)
}

/// The bound of `mirror_many_run`: a new cluster at `root` with `layout`'s topics, each partition's first
/// set appended by `append_as_follower` before the clock (as the mirror's first tick is), then the other
/// sets timed, round-robin over the partitions (set k of every partition, then k+1: a fetch round's
/// order), by `append_as_follower`: the batches kept as they are, no record walk, no producer checks
/// beyond the follower's, and no flush (Kafka's `flush.messages` default, as the mirror's round).
/// Returns the cluster and the time the timed appends took.
pub fn follower_many_run(
    storage: &Arc<dyn Storage>,
    root: &Path,
    layout: &[(String, i32)],
    sets: &[PartitionSets],
) -> anyhow::Result<(Arc<Cluster>, Duration)> {
    let c = new_cluster(storage, root, true)?;
    let mut logs = Vec::with_capacity(sets.len());
    for (topic, partitions) in layout {
        c.create_topic(topic, *partitions, None, &[])?;
        for p in 0..*partitions {
            logs.push(
                c.log(topic, p)
                    .ok_or_else(|| anyhow::anyhow!("no partition {topic}-{p} after creating it"))?,
            );
        }
    }
    anyhow::ensure!(
        logs.len() == sets.len(),
        "{} partitions, {} sets",
        logs.len(),
        sets.len()
    );
    for (log, s) in logs.iter().zip(sets) {
        log.append_as_follower(&s.first)?;
    }
    let rounds = sets.iter().map(|s| s.rest.len()).max().unwrap_or(0);
    let started = Instant::now();
    for k in 0..rounds {
        for (log, s) in logs.iter().zip(sets) {
            if let Some(set) = s.rest.get(k) {
                log.append_as_follower(set)?;
            }
        }
    }
    let elapsed = started.elapsed();
    drop(logs);
    Ok((Arc::new(c), elapsed))
}

/// What one cluster-scale mirror run measured.
#[derive(Debug, Clone, Copy)]
pub struct ManyRun {
    /// From every partition MIRRORING with its first batch mirrored to caught up (ticks until idle).
    pub mirror: Duration,
    /// Bytes the timed fetches appended (all but each partition's first batch).
    pub bytes: u64,
    /// From the RemoveTopicsFromMirror request for every topic to every partition STOPPED (barrier
    /// written, and flushed when the cluster syncs), if asked for.
    pub failover: Option<Duration>,
}

/// Mirrors the `layout` topics of `source` into a new cluster at `root` until idle, then, with
/// `failover`, fails all of them over at once. PREPARING (per partition: the LME lookup and its state
/// writes) is done before the clock starts and without syncs, as it is part of neither the copy rate
/// nor the failover; syncs are then turned on for the timed part. The cluster is left open (its
/// caller drops it: closing a thousand partitions is no part of any figure and takes long).
pub fn mirror_many_run(
    storage: &Arc<dyn Storage>,
    root: &Path,
    source: &Arc<Cluster>,
    layout: &[(String, i32)],
    failover: bool,
) -> anyhow::Result<(Cluster, ManyRun)> {
    let topics: Vec<String> = layout.iter().map(|(t, _)| t.clone()).collect();
    let partitions: usize = layout.iter().map(|(_, n)| *n as usize).sum();
    let c = new_cluster(storage, root, false)?;
    c.create_mirror("bench", &source.root().display().to_string())?;
    c.connect_source("bench", Arc::new(source.as_source()));
    for (t, r) in c.add_topics("bench", &topics)? {
        r.map_err(|e| anyhow::anyhow!("adding {t} to the mirror: {e}"))?;
    }
    prepare_all(&c, partitions)?;
    let c = first_batches(c, source, layout)?.with_settings(MirrorSettings::default());
    let started = Instant::now();
    let report = c.run_until_idle(usize::MAX);
    let mirror = started.elapsed();
    anyhow::ensure!(report.errors.is_empty(), "mirroring: {:?}", report.errors);
    caught_up(&c, source, layout)?;
    let failover = if failover {
        Some(failover_all(&c, &topics, partitions)?)
    } else {
        None
    };
    let run = ManyRun {
        mirror,
        bytes: report.bytes_appended,
        failover,
    };
    Ok((c, run))
}

/// Ticks until every one of the `partitions` mirror partitions is MIRRORING.
fn prepare_all(c: &Cluster, partitions: usize) -> anyhow::Result<()> {
    let mirroring = |c: &Cluster| {
        c.describe()
            .iter()
            .filter(|d| d.state == Some(MirrorState::Mirroring))
            .count()
    };
    while mirroring(c) < partitions {
        let r = c.tick();
        anyhow::ensure!(r.errors.is_empty(), "preparing: {:?}", r.errors);
        anyhow::ensure!(
            r.progressed(),
            "preparing stalled with {} of {partitions} partitions MIRRORING",
            mirroring(c)
        );
    }
    Ok(())
}

/// One tick of fetches of one batch each: every partition's first batch, whose append writes the
/// partition's leader-epoch checkpoint (synced), once in its life, as the leader append's first round
/// does (`append_many_run`'s `untimed`). Every partition holds the same batches, so a per-partition
/// limit of one batch's size takes exactly one from each (a limit below it would take one from the
/// first partition only: Kafka's rule, one oversized batch per fetch).
fn first_batches(
    c: Cluster,
    source: &Cluster,
    layout: &[(String, i32)],
) -> anyhow::Result<Cluster> {
    let partitions: usize = layout.iter().map(|(_, n)| *n as usize).sum();
    let (topic, _) = layout
        .first()
        .ok_or_else(|| anyhow::anyhow!("no topics to mirror"))?;
    let log = source
        .log(topic, 0)
        .ok_or_else(|| anyhow::anyhow!("no partition {topic}-0 in the source"))?;
    let read = log.read(0, 1, None, true)?;
    let batch = klog::log::format::Batches::new(read.records.as_slice())
        .next()
        .ok_or_else(|| anyhow::anyhow!("{topic}-0 of the source is empty"))??
        .size_in_bytes();
    let c = c.with_settings(MirrorSettings {
        fetch_max_bytes: batch,
        fetch_response_max_bytes: batch * (partitions + 1),
        fsync: false,
        ..MirrorSettings::default()
    });
    let r = c.tick();
    anyhow::ensure!(r.errors.is_empty(), "first batches: {:?}", r.errors);
    anyhow::ensure!(
        r.batches_appended == partitions as u64,
        "the first tick mirrored {} batches into {partitions} partitions",
        r.batches_appended
    );
    Ok(c)
}

/// Every mirrored partition ends where its source partition ends.
fn caught_up(c: &Cluster, source: &Cluster, layout: &[(String, i32)]) -> anyhow::Result<()> {
    for (topic, partitions) in layout {
        for p in 0..*partitions {
            let end = |cl: &Cluster, what: &str| {
                cl.log(topic, p)
                    .map(|l| l.log_end_offset())
                    .ok_or_else(|| anyhow::anyhow!("no partition {topic}-{p} in the {what}"))
            };
            let (src, dst) = (end(source, "source")?, end(c, "mirror")?);
            anyhow::ensure!(
                src == dst,
                "the mirror of {topic}-{p} stopped at {dst} of {src}"
            );
        }
    }
    Ok(())
}

/// A whole mirror's failover, timed end to end: RemoveTopicsFromMirror for every topic, then ticks
/// until idle; every partition must be STOPPED.
fn failover_all(c: &Cluster, topics: &[String], partitions: usize) -> anyhow::Result<Duration> {
    let started = Instant::now();
    for (t, r) in c.remove_topics("bench", topics)? {
        r.map_err(|e| anyhow::anyhow!("removing {t} from the mirror: {e}"))?;
    }
    let report = c.run_until_idle(usize::MAX);
    let elapsed = started.elapsed();
    anyhow::ensure!(report.errors.is_empty(), "failover: {:?}", report.errors);
    let stopped = c
        .describe()
        .iter()
        .filter(|d| d.state == Some(MirrorState::Stopped))
        .count();
    anyhow::ensure!(
        stopped == partitions,
        "failover left {stopped} of {partitions} partitions STOPPED"
    );
    Ok(elapsed)
}

/// This process's peak resident set size (`VmHWM` of /proc/self/status), in KiB.
pub fn peak_rss_kib() -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no VmHWM line in /proc/self/status"))
}

/// The `.log` files of `dir` (a partition directory), in offset order, open for reading.
fn log_files(dir: &Path) -> anyhow::Result<Vec<std::fs::File>> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    paths.sort();
    anyhow::ensure!(!paths.is_empty(), "no .log file in {}", dir.display());
    paths
        .iter()
        .map(|p| std::fs::File::open(p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display())))
        .collect()
}

/// One partition's `.log` files read as the mirror's fetches take them: `pread`s of consecutive ranges
/// of the given lengths from `start`, a range never crossing into the next file (a fetch never spans
/// two segments).
struct ReadCursor {
    /// Each file with its length (taken at open: the source is not written meanwhile).
    files: Vec<(std::fs::File, u64)>,
    file: usize,
    position: u64,
}

impl ReadCursor {
    fn open(dir: &Path, start: u64) -> anyhow::Result<Self> {
        let files = log_files(dir)?
            .into_iter()
            .map(|f| Ok((f.metadata()?.len(), f)))
            .map(|r: std::io::Result<_>| r.map(|(len, f)| (f, len)))
            .collect::<std::io::Result<_>>()?;
        Ok(ReadCursor {
            files,
            file: 0,
            position: start,
        })
    }

    /// Reads the next `buf.len()` bytes into `buf`.
    fn read(&mut self, buf: &mut [u8]) -> anyhow::Result<()> {
        use std::os::unix::fs::FileExt;
        loop {
            let (file, len) = self
                .files
                .get(self.file)
                .ok_or_else(|| anyhow::anyhow!("read past the last segment"))?;
            if self.position + buf.len() as u64 <= *len {
                file.read_exact_at(buf, self.position)?;
                self.position += buf.len() as u64;
                return Ok(());
            }
            self.file += 1;
            self.position = 0;
        }
    }
}

/// The plainest read of what `mirror_run` fetches from partition 0 of `topic` in `source`: a `pread` of
/// each fetch's bytes (`chunks`' lengths, in order) from the source's `.log` into one reused buffer.
/// Every mirror that copies its fetches out of the source pays at least this (a copy out of the page
/// cache); beside `mirror_append_run` it gives the ceiling of the mirror's ratio to its bound.
pub fn pread_run(source: &Cluster, topic: &str, chunks: &[Vec<u8>]) -> anyhow::Result<Duration> {
    let mut cursor = ReadCursor::open(&source.root().join(format!("{topic}-0")), 0)?;
    let mut buf = vec![0u8; chunks.iter().map(Vec::len).max().unwrap_or(0)];
    let started = Instant::now();
    for c in chunks {
        cursor.read(&mut buf[..c.len()])?;
    }
    Ok(started.elapsed())
}

/// [`pread_run`] at cluster scale: every partition's fetched sets (`sets`, as `many_fetch_sets` read
/// them) read with `pread` from its `.log` in `source`, in the order of a fetch round (set k of every
/// partition, then k + 1), into one reused buffer; the files are opened before the clock.
pub fn pread_many_run(
    source: &Cluster,
    layout: &[(String, i32)],
    sets: &[PartitionSets],
) -> anyhow::Result<Duration> {
    let mut cursors = Vec::with_capacity(sets.len());
    let dirs = layout
        .iter()
        .flat_map(|(t, n)| (0..*n).map(move |p| format!("{t}-{p}")));
    for (dir, s) in dirs.zip(sets) {
        cursors.push(ReadCursor::open(
            &source.root().join(dir),
            s.first.len() as u64,
        )?);
    }
    anyhow::ensure!(cursors.len() == sets.len(), "{} sets", sets.len());
    let largest = sets.iter().flat_map(|s| &s.rest).map(Vec::len).max();
    let mut buf = vec![0u8; largest.unwrap_or(0)];
    let rounds = sets.iter().map(|s| s.rest.len()).max().unwrap_or(0);
    let started = Instant::now();
    for k in 0..rounds {
        for (cursor, s) in cursors.iter_mut().zip(sets) {
            if let Some(set) = s.rest.get(k) {
                cursor.read(&mut buf[..set.len()])?;
            }
        }
    }
    Ok(started.elapsed())
}
