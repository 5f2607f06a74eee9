//! A gzip batch of about 1 MiB that inflates to 1 GiB is refused by a leader append without the process
//! ever holding the gigabyte: a counting allocator records the peak of live heap bytes during the
//! append. Its own test binary, so no other test allocates beside it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use klog_log::clock::ManualClock;
use klog_log::config::LogConfig;
use klog_log::format::{crc32c, Compression};
use klog_log::io::{SimStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog};
use klog_log::KafkaError;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                let grown = new_size - layout.size();
                let live = LIVE.fetch_add(grown, Ordering::Relaxed) + grown;
                PEAK.fetch_max(live, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const NOW: i64 = 1_796_000_000_000;
const GIB: usize = 1 << 30;
const MIB: usize = 1 << 20;

/// One producer batch (1 record declared) whose gzip payload is 1024 members of 1 MiB of zeros.
fn bomb_batch() -> Vec<u8> {
    let mut member = Vec::new();
    Compression::Gzip.compress(&vec![0u8; MIB], &mut member);
    let payload = member.repeat(GIB / MIB);
    let mut b = vec![0u8; 61];
    b[8..12].copy_from_slice(&((49 + payload.len()) as i32).to_be_bytes());
    b[12..16].copy_from_slice(&(-1i32).to_be_bytes());
    b[16] = 2;
    b[21..23].copy_from_slice(&(Compression::Gzip.id() as i16).to_be_bytes());
    b[27..35].copy_from_slice(&NOW.to_be_bytes());
    b[35..43].copy_from_slice(&NOW.to_be_bytes());
    b[43..51].copy_from_slice(&(-1i64).to_be_bytes());
    b[51..53].copy_from_slice(&(-1i16).to_be_bytes());
    b[53..57].copy_from_slice(&(-1i32).to_be_bytes());
    b[57..61].copy_from_slice(&1i32.to_be_bytes());
    b.extend_from_slice(&payload);
    let crc = crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

#[test]
fn a_gzip_batch_inflating_to_a_gibibyte_is_refused_in_bounded_memory() {
    let mut bomb = bomb_batch();
    assert!(bomb.len() < 2 * MIB, "the bomb is small: {}", bomb.len());
    let mut config = LogConfig::default();
    config
        .set("max.message.bytes", &(2 * MIB).to_string())
        .unwrap();
    let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(1));
    let clock = Arc::new(ManualClock::new(NOW));
    let (log, _) = PartitionLog::open_with_clock(
        storage,
        std::path::Path::new("/sim/bomb-0"),
        config,
        OpenOptions::default(),
        clock,
    )
    .unwrap();

    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let err = log.append_as_leader(&mut bomb, 0).unwrap_err();
    let peak = PEAK.load(Ordering::Relaxed) - before;

    assert_eq!(err.kafka_error(), KafkaError::MessageTooLarge, "{err}");
    assert_eq!(log.log_end_offset(), 0, "nothing written");
    // The limit is 64 x max.message.bytes capped at 128 MiB; generous headroom, far below the GiB.
    assert!(
        peak < 256 * MIB,
        "the append held {} MiB at its peak",
        peak / MIB
    );
}
