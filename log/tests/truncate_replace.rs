//! Truncating a segment whose `.log` was ever memory-mapped writes the kept prefix to a new file and
//! renames it over (a reader's map of the old file never faults). The copy goes through a bounded buffer
//! (memory is not the kept prefix: a mirror truncating into a 1 GiB sealed segment), and a power cut at
//! any operation of the replacement leaves the old file or the new one, never a mix.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::format::{BatchBuilder, Compression};
use klog_log::io::{CountingStorage, IoOp, SimStorage, StdStorage, Storage};
use klog_log::segment::LogSegment;

const BATCH_VALUE: usize = 60 << 10;
/// ~6 MiB of batches of ~60 KiB, one record each at offsets 0, 1, 2, ...
const BATCHES: i64 = 100;

/// A sealed segment of `BATCHES` batches at `dir`; the `.log`'s bytes.
fn sealed_segment(storage: Arc<dyn Storage>, dir: &Path) -> (LogSegment, Vec<u8>) {
    storage.create_dir_all(dir).unwrap();
    let seg = LogSegment::create(storage.clone(), dir, 0, 4096, 10 << 20, None, 0).unwrap();
    let mut all = Vec::new();
    for i in 0..BATCHES {
        let mut b = BatchBuilder::new(Compression::None).base_offset(i);
        b.append(
            1_700_000_000_000 + i,
            None,
            Some(&vec![b'a' + (i % 26) as u8; BATCH_VALUE]),
            &[],
        )
        .unwrap();
        let bytes = b.build().unwrap();
        seg.append(i, &bytes).unwrap();
        all.extend_from_slice(&bytes);
    }
    seg.on_become_inactive().unwrap();
    seg.flush().unwrap();
    // The new files' directory entries made durable, as a log's flush does for a new segment.
    storage.sync_dir(dir).unwrap();
    (seg, all)
}

/// Where the batch holding `offset` starts in `log`.
fn position_of(log: &[u8], offset: i64) -> usize {
    let mut pos = 0;
    for _ in 0..offset {
        pos += i32::from_be_bytes(log[pos + 8..pos + 12].try_into().unwrap()) as usize + 12;
    }
    pos
}

#[test]
fn truncating_a_mapped_segment_copies_through_a_bounded_buffer() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("truncate-replace/t-0");
    let _ = std::fs::remove_dir_all(&dir);
    let counting = Arc::new(CountingStorage::new(Arc::new(StdStorage)));
    let (seg, all) = sealed_segment(counting.clone(), &dir);
    // A reader maps the sealed segment (a read of all of it), and keeps its bytes.
    let mapped = seg.slice(0, seg.size()).unwrap();
    assert!(
        mapped.is_mapped(),
        "a sealed segment on a real file is read through a map"
    );
    let cut = BATCHES - 3;
    let kept = position_of(&all, cut);
    counting.take();
    seg.truncate_to(cut).unwrap();
    let largest_write = counting.count(IoOp::LargestWrite, "log");
    let largest_read = counting.count(IoOp::LargestRead, "log");
    assert!(kept > 5 << 20, "{kept} bytes kept");
    assert!(
        largest_write <= 1 << 20 && largest_read <= 1 << 20,
        "one write of {largest_write} bytes, one read of {largest_read}, to keep {kept} bytes"
    );
    assert!(
        counting.count(IoOp::Rename, "log") == 1,
        "the prefix replaced the file"
    );
    assert_eq!(
        std::fs::read(dir.join(format!("{:020}.log", 0))).unwrap(),
        &all[..kept]
    );
    assert!(!dir.join(format!("{:020}.log.tmp", 0)).exists());
    // The reader's map still holds the old file's bytes.
    assert_eq!(mapped.as_slice(), &all[..]);
    assert_eq!(seg.size(), kept as u64);
}

#[test]
fn a_power_cut_at_any_operation_of_the_replacement_leaves_the_old_or_the_new_log() {
    let dir = PathBuf::from("/sim/truncate-replace/t-0");
    let log_path = dir.join(format!("{:020}.log", 0));
    let cut = BATCHES - 3;
    let mut outcomes = (0, 0);
    for k in 0.. {
        let sim = Arc::new(SimStorage::new(11));
        let (seg, all) = sealed_segment(sim.clone(), &dir);
        seg.assume_mapped();
        let kept = position_of(&all, cut);
        let start = sim.ops();
        sim.power_off_at(start + 1 + k);
        let done = seg.truncate_to(cut).is_ok();
        let ran = sim.ops() - start;
        sim.crash(true);
        let durable = sim.live_bytes(&log_path).unwrap();
        if durable == all {
            outcomes.0 += 1;
        } else {
            assert_eq!(
                durable.len(),
                kept,
                "power cut at operation {k} of the truncation"
            );
            assert!(
                durable == all[..kept],
                "power cut at operation {k}: the new file is the prefix"
            );
            outcomes.1 += 1;
        }
        if done && ran <= k {
            break; // the power cut came after every operation of the truncation
        }
        assert!(k < 1000, "the truncation never finished");
    }
    assert!(
        outcomes.0 > 0 && outcomes.1 > 0,
        "both outcomes seen: {outcomes:?}"
    );
}

/// `klog cluster export` hard-links sealed segments into a Kafka log directory: a truncation in klog
/// (a failback's alignment, a stop's cut to the LSO) must never shrink or append to that shared file,
/// whether it cuts bytes or only makes the segment active again.
#[test]
fn truncating_a_hard_linked_segment_leaves_the_other_link_unchanged() {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("truncate-replace-linked");
    let _ = std::fs::remove_dir_all(&base);
    let dir = base.join("t-0");
    let (seg, all) = sealed_segment(Arc::new(StdStorage), &dir);
    let exported = base.join("exported.log");
    std::fs::hard_link(dir.join(format!("{:020}.log", 0)), &exported).unwrap();
    let cut = BATCHES - 3;
    seg.truncate_to(cut).unwrap();
    let after = std::fs::read(&exported).unwrap();
    assert!(
        after == all,
        "a truncation changed the exported link: {} bytes, were {}",
        after.len(),
        all.len()
    );
    // A truncation at the segment's end cuts nothing, but the segment is active again: the next
    // append must not reach the exported file either.
    let dir2 = base.join("t-1");
    let (seg2, all2) = sealed_segment(Arc::new(StdStorage), &dir2);
    let exported2 = base.join("exported2.log");
    std::fs::hard_link(dir2.join(format!("{:020}.log", 0)), &exported2).unwrap();
    seg2.truncate_to(BATCHES).unwrap();
    let mut b = BatchBuilder::new(Compression::None).base_offset(BATCHES);
    b.append(1_700_000_001_000, None, Some(b"after"), &[])
        .unwrap();
    seg2.append(BATCHES, &b.build().unwrap()).unwrap();
    seg2.flush().unwrap();
    let after2 = std::fs::read(&exported2).unwrap();
    assert!(
        after2 == all2,
        "an append after a truncation reached the exported link: {} bytes, were {}",
        after2.len(),
        all2.len()
    );
    let _ = std::fs::remove_dir_all(&base);
}
