//! A segment's recovery pass reads its `.log` in chunks, on a helper thread ahead of the check or on the
//! checking thread (`read_ahead.rs`): the same damaged segments must recover the same way both ways
//! (cut point, tail, epochs, the batches handed to the producer-state replay, the rebuilt `.index` and
//! `.timeindex` byte for byte), and as one check over the whole file at once decides.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::read_ahead::{CHUNK, HEADROOM};
use super::recover::tests_hook::{HELPED, HELPER};
use super::{LogSegment, SegmentRecovery};
use crate::format::{AnyBatch, BatchBuilder, Batches, Compression, RecordBatchMut, Tail};
use crate::io::{StdStorage, Storage};

const MAX_INDEX_BYTES: u32 = 10 << 20;
const INDEX_INTERVAL_BYTES: u32 = 4096;

/// A batch written to the segment: its position, base offset and size.
type Placed = (u64, i64, u64);

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("klog-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One batch of one record of `value_bytes`, from one of four idempotent producers, at `base` with a
/// leader epoch that changes every 50 batches.
fn batch(i: usize, base: i64, value_bytes: usize) -> Vec<u8> {
    let mut b =
        BatchBuilder::new(Compression::None).producer(1000 + (i % 4) as i64, 0, (i / 4) as i32);
    let value = vec![(i % 251) as u8; value_bytes];
    b.append(
        1_700_000_000_000 + i as i64,
        Some(b"key"),
        Some(&value),
        &[],
    )
    .unwrap();
    let mut bytes = b.build().unwrap();
    let mut view = RecordBatchMut::parse(&mut bytes).unwrap();
    view.set_base_offset(base);
    view.set_partition_leader_epoch((i / 50) as i32);
    bytes
}

/// About 9 MiB of batches of 16 KiB, with one of 300 KiB (more than the headroom) and one of 2.5 MiB
/// (more than a chunk) across chunk ends.
fn layout(position: u64) -> usize {
    let into_chunk = position % CHUNK as u64;
    match position / CHUNK as u64 {
        3 if into_chunk > CHUNK as u64 - (64 << 10) => 300 << 10,
        5 if into_chunk > CHUNK as u64 - (64 << 10) => (5 << 20) / 2,
        _ => 16 << 10,
    }
}

/// Writes the batches of `layout` into a new segment in `dir`, closed; returns where they went.
fn write_segment(dir: &Path) -> Vec<Placed> {
    let storage: Arc<dyn Storage> = Arc::new(StdStorage);
    let seg = LogSegment::create(
        storage,
        dir,
        0,
        INDEX_INTERVAL_BYTES,
        MAX_INDEX_BYTES,
        None,
        0,
    )
    .unwrap();
    let (mut placed, mut position, mut base) = (Vec::new(), 0u64, 0i64);
    for i in 0.. {
        if position >= 9 << 20 {
            break;
        }
        let bytes = batch(i, base, layout(position));
        seg.append(base, &bytes).unwrap();
        placed.push((position, base, bytes.len() as u64));
        position += bytes.len() as u64;
        base += 1;
    }
    seg.close().unwrap();
    placed
}

fn log_path(dir: &Path) -> PathBuf {
    dir.join("00000000000000000000.log")
}

/// The batch whose bytes run across `boundary`.
fn across(placed: &[Placed], boundary: u64) -> Placed {
    *placed
        .iter()
        .find(|(p, _, len)| *p < boundary && p + len > boundary)
        .expect("a batch across the boundary")
}

/// What one recovery of a segment found and left.
#[derive(Debug, PartialEq)]
struct Outcome {
    recovery: SegmentRecovery,
    /// (base offset, last offset, producer id, base sequence, leader epoch) of each batch handed over.
    batches: Vec<(i64, i64, i64, i32, i32)>,
    index: Vec<u8>,
    time_index: Vec<u8>,
    log_len: u64,
}

fn recover(dir: &Path, helper: bool) -> Outcome {
    let size = std::fs::metadata(log_path(dir)).unwrap().len();
    let seg = LogSegment::open(
        Arc::new(StdStorage),
        dir,
        0,
        size,
        false,
        INDEX_INTERVAL_BYTES,
        MAX_INDEX_BYTES,
        0,
    )
    .unwrap();
    HELPER.with(|h| h.set(Some(helper)));
    HELPED.with(|h| h.set(false));
    let mut batches = Vec::new();
    let recovery = seg
        .recover_with(&mut |b| {
            if let AnyBatch::V2(b) = b {
                batches.push((
                    b.base_offset(),
                    b.last_offset(),
                    b.producer_id(),
                    b.base_sequence(),
                    b.partition_leader_epoch(),
                ));
            }
        })
        .unwrap();
    HELPER.with(|h| h.set(None));
    assert_eq!(HELPED.with(|h| h.get()), helper, "the pass read as asked");
    seg.close().unwrap();
    Outcome {
        recovery,
        batches,
        index: std::fs::read(dir.join("00000000000000000000.index")).unwrap(),
        time_index: std::fs::read(dir.join("00000000000000000000.timeindex")).unwrap(),
        log_len: std::fs::metadata(log_path(dir)).unwrap().len(),
    }
}

/// Where one check over the whole file ends, and how.
fn whole_file(dir: &Path) -> (u64, Tail) {
    let bytes = std::fs::read(log_path(dir)).unwrap();
    let mut batches = Batches::at(&bytes, 0);
    let mut valid = 0;
    for batch in batches.by_ref() {
        match batch {
            Ok(b) => valid = b.position() + b.size_in_bytes() as u64,
            Err(_) => break,
        }
    }
    (valid, batches.tail().unwrap())
}

/// Writes the segment twice, damages both copies with `damage`, recovers one with a helper and one
/// without; both must match each other and the whole-file check. Returns the outcome.
fn both_ways(name: &str, damage: impl Fn(&Path, &[Placed])) -> (Outcome, Vec<Placed>) {
    let root = temp_dir(&format!("recover-chunks-{name}"));
    let mut outcomes = Vec::new();
    let mut placed = Vec::new();
    for helper in [false, true] {
        let dir = root.join(if helper { "helper-0" } else { "inline-0" });
        std::fs::create_dir_all(&dir).unwrap();
        placed = write_segment(&dir);
        damage(&log_path(&dir), &placed);
        let (valid, tail) = whole_file(&dir);
        let outcome = recover(&dir, helper);
        assert_eq!(outcome.recovery.valid_bytes, valid, "{name}: the cut");
        assert_eq!(
            std::mem::discriminant(&outcome.recovery.tail),
            std::mem::discriminant(&tail),
            "{name}: the tail ({:?} against {tail:?})",
            outcome.recovery.tail
        );
        assert_eq!(outcome.log_len, valid, "{name}: the file is cut there");
        outcomes.push(outcome);
    }
    let with_helper = outcomes.pop().unwrap();
    let inline = outcomes.pop().unwrap();
    assert_eq!(
        with_helper, inline,
        "{name}: the helper changed the outcome"
    );
    std::fs::remove_dir_all(&root).unwrap();
    (inline, placed)
}

fn open_log(path: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap()
}

fn write_at(path: &Path, bytes: &[u8], position: u64) {
    use std::os::unix::fs::FileExt;
    open_log(path).write_all_at(bytes, position).unwrap();
}

#[test]
fn a_clean_segment_recovers_whole_both_ways() {
    let (out, placed) = both_ways("clean", |_, _| {});
    let (last_pos, last_base, last_len) = *placed.last().unwrap();
    assert!(placed.iter().any(|p| p.2 > CHUNK as u64));
    assert!(placed
        .iter()
        .any(|p| p.2 > HEADROOM as u64 && p.2 < CHUNK as u64));
    assert_eq!(out.recovery.valid_bytes, last_pos + last_len);
    assert_eq!(out.recovery.tail, Tail::Clean);
    assert_eq!(out.recovery.next_offset, last_base + 1);
    assert_eq!(out.batches.len(), placed.len());
    assert_eq!(out.recovery.epochs.len(), placed.len().div_ceil(50));
    assert!(out.index.iter().any(|&b| b != 0), "index entries rebuilt");
}

#[test]
fn a_torn_tail_is_cut_both_ways() {
    let (out, placed) = both_ways("torn", |path, placed| {
        let (pos, _, len) = *placed.last().unwrap();
        open_log(path).set_len(pos + len / 2).unwrap();
    });
    assert_eq!(out.recovery.valid_bytes, placed.last().unwrap().0);
    assert!(matches!(out.recovery.tail, Tail::Partial { .. }));
}

#[test]
fn a_torn_batch_larger_than_a_chunk_is_cut_both_ways() {
    let (out, placed) = both_ways("torn-big", |path, placed| {
        let (pos, _, len) = *placed.iter().find(|p| p.2 > CHUNK as u64).unwrap();
        open_log(path).set_len(pos + len - 100).unwrap();
    });
    let big = placed.iter().find(|p| p.2 > CHUNK as u64).unwrap();
    assert_eq!(out.recovery.valid_bytes, big.0);
}

#[test]
fn a_corrupt_batch_across_a_chunk_end_cuts_at_its_start_both_ways() {
    let boundary = 4 * CHUNK as u64;
    let (out, placed) = both_ways("corrupt", |path, placed| {
        let (pos, _, len) = across(placed, boundary);
        let at = boundary + (pos + len - boundary) / 2;
        write_at(path, &[0xAB, 0xCD], at);
    });
    assert_eq!(out.recovery.valid_bytes, across(&placed, boundary).0);
    assert!(out.recovery.corruption.is_some());
}

#[test]
fn a_zero_filled_tail_longer_than_the_headroom_is_cut_both_ways() {
    let (out, placed) = both_ways("zeros", |path, _| {
        let f = open_log(path);
        let len = f.metadata().unwrap().len();
        f.set_len(len + (3 << 20) + 5).unwrap();
    });
    let (pos, _, len) = *placed.last().unwrap();
    assert_eq!(out.recovery.valid_bytes, pos + len);
    assert!(matches!(out.recovery.tail, Tail::ZeroFilled { .. }));
}

#[test]
fn zeros_then_a_batch_are_corruption_both_ways() {
    let (out, placed) = both_ways("zeros-then-batch", |path, _| {
        let f = open_log(path);
        let len = f.metadata().unwrap().len();
        let first = batch(0, 0, 1000);
        write_at(path, &first, len + (3 << 20));
    });
    let (pos, _, len) = *placed.last().unwrap();
    assert_eq!(out.recovery.valid_bytes, pos + len);
    assert!(out.recovery.corruption.is_some());
}

#[test]
fn a_batch_length_past_the_end_across_a_chunk_end_is_a_partial_tail_both_ways() {
    let boundary = 7 * CHUNK as u64;
    let (out, placed) = both_ways("length-past-end", |path, placed| {
        let (pos, _, _) = across(placed, boundary);
        // `batch_length` is outside the CRC: a torn header write can leave any value there.
        write_at(path, &(100i32 << 20).to_be_bytes(), pos + 8);
    });
    assert_eq!(out.recovery.valid_bytes, across(&placed, boundary).0);
    assert!(matches!(out.recovery.tail, Tail::Partial { .. }));
}

/// File bytes behind [`StorageFile`], whose reads fail on the read-ahead helper's thread (as a thread
/// that cannot set up its own io_uring would).
#[derive(Debug)]
struct FailsOffThread(Vec<u8>);

impl crate::io::StorageFile for FailsOffThread {
    fn read_at(&self, buf: &mut [u8], position: u64) -> std::io::Result<usize> {
        if std::thread::current().name() == Some("klog-recover-read") {
            return Err(std::io::Error::other("no ring on this thread"));
        }
        let from = (position as usize).min(self.0.len());
        let n = buf.len().min(self.0.len() - from);
        buf[..n].copy_from_slice(&self.0[from..from + n]);
        Ok(n)
    }
    fn write_at(&self, _: &[u8], _: u64) -> std::io::Result<()> {
        Err(std::io::Error::other("read only"))
    }
    fn sync(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn set_len(&self, _: u64) -> std::io::Result<()> {
        Err(std::io::Error::other("read only"))
    }
    fn len(&self) -> std::io::Result<u64> {
        Ok(self.0.len() as u64)
    }
    fn os_path(&self) -> Option<&Path> {
        None
    }
}

#[test]
fn a_read_the_helper_cannot_make_is_made_by_the_pass() {
    let bytes: Vec<u8> = (0..(5 * CHUNK + 777)).map(|i| (i % 253) as u8).collect();
    let file = FailsOffThread(bytes.clone());
    let mut pool = Vec::new();
    let mut read = Vec::new();
    std::thread::scope(|scope| {
        let mut ahead =
            super::read_ahead::ReadAhead::start(scope, &file, bytes.len() as u64, true, &mut pool);
        assert!(ahead.has_helper());
        loop {
            let chunk = ahead.next().expect("read on the pass's thread");
            read.extend_from_slice(&chunk.buf[HEADROOM..HEADROOM + chunk.len]);
            ahead.recycle(chunk.buf);
            if chunk.len == 0 || ahead.position() >= bytes.len() as u64 {
                break;
            }
        }
        assert!(!ahead.has_helper(), "the helper stopped after its error");
        ahead.finish(&mut pool);
    });
    assert_eq!(read, bytes);
}
