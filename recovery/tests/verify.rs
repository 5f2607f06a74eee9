//! `verify_partition`: each kind of inconsistency is reported, and the walk is linear: every `.log` byte is
//! read once (not again per producer snapshot), whatever the number of segments and snapshots.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Compression};
use klog_log::io::{read_file, CountingStorage, IoOp, SimStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog};
use klog_recovery::verify_partition;

/// The simulated storage (to patch its files), seen through a [`CountingStorage`]: the bytes read from
/// `.log` files tell a linear walk from one that reads again.
struct Counted {
    inner: Arc<SimStorage>,
    io: Arc<CountingStorage>,
}

const PRODUCERS: i64 = 3;

/// A partition of many small segments (one producer snapshot at each roll) from idempotent producers.
fn build() -> (Counted, PathBuf) {
    let inner = Arc::new(SimStorage::new(7));
    let storage = Counted {
        io: Arc::new(CountingStorage::new(inner.clone())),
        inner,
    };
    let dir = PathBuf::from("/sim/verify/t-0");
    let config = LogConfig {
        segment_bytes: 8 << 10,
        index_interval_bytes: 512,
        ..LogConfig::default()
    };
    let dyn_storage: Arc<dyn Storage> = storage.io.clone();
    let (log, _) = PartitionLog::open(dyn_storage, &dir, config, OpenOptions::default()).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let mut sequences = [0i32; PRODUCERS as usize];
    for i in 0..1200i64 {
        let pid = i % PRODUCERS;
        let seq = &mut sequences[pid as usize];
        let mut b = BatchBuilder::new(Compression::None).producer(1000 + pid, 0, *seq);
        for r in 0..3 {
            b.append(
                now + i,
                Some(b"key"),
                Some(format!("value {i} {r}").as_bytes()),
                &[],
            )
            .unwrap();
        }
        *seq += 3;
        let mut bytes = b.build().unwrap();
        log.append_as_leader(&mut bytes, 0).unwrap();
    }
    log.close().unwrap();
    (storage, dir)
}

fn files(storage: &Counted, dir: &Path, ext: &str) -> Vec<PathBuf> {
    storage
        .inner
        .list(dir)
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(ext))
        .map(|n| dir.join(n))
        .collect()
}

fn log_bytes(storage: &Counted, dir: &Path) -> u64 {
    files(storage, dir, ".log")
        .iter()
        .map(|p| storage.inner.open(p).unwrap().len().unwrap())
        .sum()
}

/// Replaces a file's bytes from `at` with `bytes`.
fn patch(storage: &Counted, path: &Path, at: usize, bytes: &[u8]) {
    let file = storage.inner.open(path).unwrap();
    file.write_at(bytes, at as u64).unwrap();
    file.sync().unwrap();
}

#[test]
fn a_clean_partition_is_read_once() {
    let (storage, dir) = build();
    let segments = files(&storage, &dir, ".log").len();
    let snapshots = files(&storage, &dir, ".snapshot").len();
    assert!(
        segments >= 10 && snapshots >= 10,
        "{segments} segments, {snapshots} snapshots"
    );
    storage.io.take();
    let problems = verify_partition(storage.io.as_ref(), &dir).unwrap();
    assert_eq!(problems, vec![]);
    let read = storage.io.count(IoOp::ReadBytes, "log");
    let total = log_bytes(&storage, &dir);
    assert_eq!(
        read, total,
        "verify reads each .log byte once ({read} read of {total})"
    );
}

#[test]
fn every_kind_of_inconsistency_is_named() {
    let (storage, dir) = build();
    let logs = files(&storage, &dir, ".log");
    let second = &logs[1];
    let base: i64 = second
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    // An index entry pointing one byte into a batch, a time index entry naming no batch's last offset,
    // a snapshot that no replay gives.
    let index = second.with_extension("index");
    let entries = read_file(storage.inner.as_ref(), &index).unwrap().unwrap();
    assert!(entries.len() >= 16, "the second segment has index entries");
    let position = u32::from_be_bytes(entries[12..16].try_into().unwrap());
    patch(&storage, &index, 12, &(position + 1).to_be_bytes());
    let time_index = second.with_extension("timeindex");
    patch(&storage, &time_index, 8, &(-1i32).to_be_bytes());
    let snapshots = files(&storage, &dir, ".snapshot");
    let snapshot = &snapshots[snapshots.len() / 2];
    let mut bytes = read_file(storage.inner.as_ref(), snapshot)
        .unwrap()
        .unwrap();
    let last_timestamp = bytes.len() - 46 + 33; // the low byte of the last entry's `timestamp`
    bytes[last_timestamp] ^= 1;
    // The snapshot's CRC covers its entries: recompute it so the file decodes and only the replay differs.
    let crc = crc32c_of(&bytes[6..]);
    bytes[2..6].copy_from_slice(&crc.to_be_bytes());
    patch(&storage, snapshot, 0, &bytes);

    let problems = verify_partition(storage.io.as_ref(), &dir).unwrap();
    let text: Vec<String> = problems
        .iter()
        .map(|p| format!("{}: {}", p.file.display(), p.what))
        .collect();
    let has = |file: &Path, what: &str| {
        problems
            .iter()
            .any(|p| p.file == file && p.what.contains(what))
    };
    assert!(
        has(
            &index,
            &format!("points at position {}, where no batch starts", position + 1)
        ),
        "{text:#?}"
    );
    assert!(
        has(
            &time_index,
            &format!("offset {} is not the last offset of any batch", base - 1)
        ),
        "{text:#?}"
    );
    assert!(
        has(
            snapshot,
            "differs from a replay of the log from the snapshot at"
        ),
        "{text:#?}"
    );
    assert_eq!(problems.len(), 3, "{text:#?}");
}

/// CRC-32C (Castagnoli), bitwise: the snapshot file's checksum.
fn crc32c_of(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82f6_3b78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Derived state the next open rebuilds is a note, not a problem: the last segment's indexes left
/// preallocated with zeros after their entries (a broker killed before it trimmed them: one note per file,
/// not one per slot) and a segment with no `.index` or `.timeindex` (a broker that never loaded them).
#[test]
fn untrimmed_and_missing_indexes_are_notes_not_problems() {
    let (storage, dir) = build();
    let logs = files(&storage, &dir, ".log");
    let last = logs.last().unwrap();
    let (index, time_index) = (
        last.with_extension("index"),
        last.with_extension("timeindex"),
    );
    let entries = |p: &Path| read_file(storage.inner.as_ref(), p).unwrap().unwrap().len();
    let (index_len, time_len) = (entries(&index), entries(&time_index));
    assert!(
        index_len >= 8 && time_len >= 12,
        "the last segment has entries"
    );
    // Preallocated as Kafka does: 4 KiB of index, each file a whole number of entries.
    patch(&storage, &index, index_len, &vec![0u8; 4096 - index_len]);
    patch(&storage, &time_index, time_len, &vec![0u8; 4092 - time_len]);
    let first = &logs[0];
    for p in [
        first.with_extension("index"),
        first.with_extension("timeindex"),
    ] {
        storage.inner.remove(&p).unwrap();
    }

    let found = klog_recovery::verify::verify(storage.io.as_ref(), &dir).unwrap();
    assert_eq!(found.problems, vec![]);
    let notes: Vec<(PathBuf, String)> = found
        .notes
        .iter()
        .map(|n| (n.file.clone(), n.what.clone()))
        .collect();
    assert_eq!(notes.len(), 4, "{notes:#?}");
    let note_of = |p: &Path| {
        &notes
            .iter()
            .find(|n| n.0 == p)
            .unwrap_or_else(|| panic!("{notes:#?}"))
            .1
    };
    assert!(
        note_of(&first.with_extension("index")).starts_with("missing: "),
        "{notes:#?}"
    );
    assert!(
        note_of(&first.with_extension("timeindex")).starts_with("missing: "),
        "{notes:#?}"
    );
    let slots = (4096 - index_len) / 8;
    assert!(
        note_of(&index).starts_with(&format!("{slots} zero-filled slots from byte {index_len}")),
        "{notes:#?}"
    );
    let slots = (4092 - time_len) / 12;
    assert!(
        note_of(&time_index)
            .starts_with(&format!("{slots} zero-filled slots from byte {time_len}")),
        "{notes:#?}"
    );
}

/// Follower batches of three records at 0, 3, 6, ... in the epochs given, two a segment, closed; the
/// partition directory `root/e-0`.
fn epoch_log(sim: &SimStorage, root: &Path, batches: &[(i64, i32)]) -> PathBuf {
    let dir = root.join("e-0");
    let config = LogConfig {
        segment_bytes: 300,
        ..LogConfig::default()
    };
    let (log, _) =
        PartitionLog::open(Arc::new(sim.clone()), &dir, config, OpenOptions::default()).unwrap();
    for &(base, epoch) in batches {
        let mut b = BatchBuilder::new(Compression::None)
            .base_offset(base)
            .partition_leader_epoch(epoch);
        for i in 0..3 {
            b.append(
                1_700_000_000_000,
                None,
                Some(format!("{base} {i}").as_bytes()),
                &[],
            )
            .unwrap();
        }
        log.append_as_follower(&b.build().unwrap()).unwrap();
    }
    log.close().unwrap();
    dir
}

fn epoch_problems(sim: &SimStorage, dir: &Path, checkpoint: &str) -> Vec<String> {
    sim.corrupt(
        &dir.join("leader-epoch-checkpoint"),
        checkpoint.as_bytes().to_vec(),
    )
    .unwrap();
    verify_partition(sim, dir)
        .unwrap()
        .into_iter()
        .filter(|p| p.file.ends_with("leader-epoch-checkpoint"))
        .map(|p| p.what)
        .collect()
}

/// `verify` said ok to a checkpoint the batches contradict (epoch 0 starting at 12 where every batch from
/// 0 is in epoch 0, as a recovery that rebuilt a later segment first wrote it): each disagreement is
/// named; a gap between runs (compaction) and a log start inside a run are not disagreements.
#[test]
fn a_leader_epoch_checkpoint_the_batches_contradict_is_reported() {
    let sim = SimStorage::new(3);
    let root = Path::new("/sim/verify-epochs");
    let dir = epoch_log(
        &sim,
        root,
        &[(0, 0), (3, 0), (6, 0), (9, 0), (12, 0), (15, 0)],
    );
    assert_eq!(
        epoch_problems(&sim, &dir, "0\n1\n0 0\n"),
        Vec::<String>::new()
    );
    let late = epoch_problems(&sim, &dir, "0\n1\n0 12\n");
    assert_eq!(late.len(), 1, "{late:?}");
    assert!(
        late[0].contains("offsets 0..=17 are in epoch 0") && late[0].contains("no epoch"),
        "{late:?}"
    );
    let later_epoch = epoch_problems(&sim, &dir, "0\n2\n0 0\n3 6\n");
    assert!(
        later_epoch
            .iter()
            .any(|p| p.contains("epoch 3 starts at 6")),
        "{later_epoch:?}"
    );
    // The log start at 6 (retention, DeleteRecords): the checkpoint starts there.
    let log_start = root.join("log-start-offset-checkpoint");
    sim.create(&log_start).unwrap();
    sim.corrupt(&log_start, b"0\n1\ne 0 6\n".to_vec()).unwrap();
    assert_eq!(
        epoch_problems(&sim, &dir, "0\n1\n0 6\n"),
        Vec::<String>::new()
    );

    let sim = SimStorage::new(4);
    let root = Path::new("/sim/verify-epochs-compacted");
    // Epoch 1 began at 10, whose batches compaction removed: its first batch left is at 21.
    let dir = epoch_log(&sim, root, &[(0, 0), (3, 0), (21, 1), (24, 1)]);
    assert_eq!(
        epoch_problems(&sim, &dir, "0\n2\n0 0\n1 10\n"),
        Vec::<String>::new()
    );
    let wrong = epoch_problems(&sim, &dir, "0\n2\n0 0\n1 24\n");
    assert_eq!(wrong.len(), 1, "{wrong:?}");
}

/// A stray empty `.log` whose base offset lies inside the segment before it (`…001.log` beside a segment
/// holding 0..=8) hides that segment's later offsets: a read of offset 3 finds the stray segment as the
/// floor, reads nothing there and goes on to the next segment, skipping 1..=8. `verify` said ok; the
/// batches of the earlier segment at or past the later segment's base are a problem naming both.
#[test]
fn a_segment_whose_base_lies_inside_the_segment_before_it_is_reported() {
    let sim = SimStorage::new(5);
    let root = Path::new("/sim/verify-overlap");
    let dir = epoch_log(&sim, root, &[(0, 0), (3, 0), (6, 0), (9, 0)]);
    let clean = verify_partition(&sim, &dir).unwrap();
    assert!(clean.is_empty(), "{clean:?}");

    // The first segment ends just before the second one's base.
    let second_base = sim
        .list(&dir)
        .unwrap()
        .iter()
        .filter(|n| n.ends_with(".log"))
        .filter_map(|n| klog_log::segment::parse_base_offset(n))
        .filter(|&b| b > 0)
        .min()
        .unwrap();
    let stray = klog_log::segment::LogSegment::log_path(&dir, 1);
    sim.create(&stray).unwrap();
    let problems = verify_partition(&sim, &dir).unwrap();
    let overlap: Vec<_> = problems
        .iter()
        .filter(|p| p.what.contains("segment at offset 1"))
        .collect();
    assert_eq!(overlap.len(), 1, "one problem per segment: {problems:?}");
    assert!(
        overlap[0].file.ends_with("00000000000000000000.log")
            && overlap[0]
                .what
                .contains(&format!("offsets 1..={}", second_base - 1)),
        "{overlap:?}"
    );
}
