//! Recovery reads every rescanned segment through one buffer for the whole open, not one per segment:
//! a fresh buffer per segment is zeroed and page-faulted in again each time (the chunk is 1 MiB), work
//! a plain read of the same files does not do. Counted with an allocator that records large allocations
//! made on the test's thread.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Compression};
use klog_log::io::{SimStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog};

/// Allocations at least this large are counted: a segment's read buffer, nothing else an open makes
/// here (summaries and index entries of a 256 KiB segment are a few KiB).
const LARGE: usize = 128 << 10;

struct Counting;

static LARGE_ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

fn count(size: usize) {
    if size >= LARGE && COUNTING.with(Cell::get) {
        LARGE_ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded to `System` unchanged; the counter only reads the size.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.size() < LARGE {
            count(new_size);
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn an_unclean_open_reads_every_segment_through_one_buffer() {
    let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(9));
    let dir = PathBuf::from("/sim/recover-buffer/t-0");
    let config = LogConfig::from_pairs(["segment.bytes=262144"]).unwrap();
    let (log, _) = PartitionLog::open(
        storage.clone(),
        &dir,
        config.clone(),
        OpenOptions::default(),
    )
    .unwrap();
    let value = vec![7u8; 1000];
    for i in 0..2000 {
        let mut b = BatchBuilder::new(Compression::None);
        b.append(1_700_000_000_000 + i, None, Some(&value), &[])
            .unwrap();
        log.append_as_leader(&mut b.build().unwrap(), 0).unwrap();
    }
    let segments = log.segment_base_offsets().len();
    assert!(segments >= 6, "{segments} segments");
    log.close().unwrap();
    drop(log);
    let unclean = OpenOptions {
        recovery_point: 0,
        log_start_offset: 0,
        clean_shutdown: false,
    };
    COUNTING.with(|c| c.set(true));
    let (log, report) = PartitionLog::open(storage, &dir, config, unclean).unwrap();
    COUNTING.with(|c| c.set(false));
    assert_eq!(report.recovered_segments.len(), segments);
    assert_eq!(
        LARGE_ALLOCATIONS.load(Ordering::Relaxed),
        1,
        "buffers of {LARGE} bytes or more allocated to recover {segments} segments"
    );
    drop(log);
}
