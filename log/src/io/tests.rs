//! The same contract for every backend, plus the simulator's crash and fault semantics.

use super::*;

mod o_direct;
#[path = "../../../tests/common/skip.rs"]
mod skip;
use o_direct::{assert_written_with_o_direct, direct_scratch_dir};

fn contract(storage: &dyn Storage, dir: &Path) {
    storage.create_dir_all(dir).unwrap();
    let a = dir.join("a");
    let f = storage.create(&a).unwrap();
    assert_eq!(
        storage.create(&a).unwrap_err().kind(),
        io::ErrorKind::AlreadyExists
    );
    f.write_at(b"hello world", 0).unwrap();
    f.write_at(b"W", 6).unwrap();
    assert_eq!(f.len().unwrap(), 11);
    let mut buf = [0u8; 32];
    assert_eq!(f.read_at(&mut buf, 0).unwrap(), 11);
    assert_eq!(&buf[..11], b"hello World");
    assert_eq!(f.read_at(&mut buf, 20).unwrap(), 0);
    f.set_len(5).unwrap();
    f.sync().unwrap();
    assert_eq!(read_file(storage, &a).unwrap().unwrap(), b"hello");
    write_atomic(storage, &dir.join("ckpt"), b"0\n0\n").unwrap();
    assert_eq!(
        storage.list(dir).unwrap(),
        vec!["a".to_string(), "ckpt".to_string()]
    );
    storage.rename(&a, &dir.join("b")).unwrap();
    assert_eq!(
        storage.open(&a).unwrap_err().kind(),
        io::ErrorKind::NotFound
    );
    storage.remove(&dir.join("b")).unwrap();
    storage.sync_dir(dir).unwrap();
    assert_eq!(storage.list(dir).unwrap(), vec!["ckpt".to_string()]);
    assert_eq!(read_file(storage, &dir.join("missing")).unwrap(), None);
}

#[test]
fn std_backend_meets_the_contract() {
    let dir = std::env::temp_dir().join(format!("klog-io-std-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    contract(&StdStorage, &dir);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The uring backend, or `None` (after one line saying why) where io_uring is unavailable, unless
/// `KLOG_REQUIRE_URING=1` asks for a failure instead.
fn uring_or_skip() -> Option<Arc<dyn Storage>> {
    match open_backend(IoBackend::Uring) {
        Ok(storage) => {
            assert_eq!(storage.name(), "uring");
            Some(storage)
        }
        Err(e) if uring_required() => panic!("KLOG_REQUIRE_URING=1 but {e}"),
        Err(e) => {
            skip::skip(&format!("the uring backend test: {e}"));
            None
        }
    }
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("klog-io-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// `KLOG_REQUIRE_URING=1` (CI): io_uring and the direct path must work, not be skipped.
fn uring_required() -> bool {
    std::env::var("KLOG_REQUIRE_URING").as_deref() == Ok("1")
}

/// Bytes that differ at every position a misplaced piece could land on.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0] ^ seed)
        .collect()
}

#[test]
fn uring_backend_meets_the_contract() {
    let Some(storage) = uring_or_skip() else {
        return;
    };
    let dir = scratch_dir("uring");
    contract(storage.as_ref(), &dir);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn uring_availability_agrees_with_open_backend() {
    // Not only the two agreeing: where io_uring is required, both must say it is there.
    if uring_required() {
        uring_available().expect("KLOG_REQUIRE_URING=1");
    }
    assert_eq!(
        uring_available().is_ok(),
        open_backend(IoBackend::Uring).is_ok()
    );
    assert_eq!(
        open_backend(IoBackend::Auto).unwrap().name(),
        "std",
        "Auto with no log directory to measure is std"
    );
}

#[test]
fn uring_write_at_and_sync_writes_a_large_buffer_whole() {
    let Some(storage) = uring_or_skip() else {
        return;
    };
    let dir = scratch_dir("uring-large");
    storage.create_dir_all(&dir).unwrap();
    let f = storage.create(&dir.join("segment")).unwrap();
    let big = pattern(3 << 20, 1);
    let position = (1 << 20) + 7;
    f.write_at_and_sync(&big, position).unwrap();
    f.write_at_and_sync(b"", 0).unwrap();
    f.write_at_and_sync(b"head", 0).unwrap();
    assert_eq!(f.len().unwrap(), position + big.len() as u64);

    let mut back = vec![0u8; big.len() + 100];
    assert_eq!(f.read_at(&mut back, position).unwrap(), big.len());
    assert!(
        back[..big.len()] == big[..],
        "uring read of the uring write"
    );
    let on_disk = std::fs::read(dir.join("segment")).unwrap();
    assert_eq!(&on_disk[..4], b"head");
    assert!(on_disk[4..position as usize].iter().all(|&b| b == 0));
    assert!(
        on_disk[position as usize..] == big[..],
        "std read of the uring write"
    );
    assert_eq!(
        f.write_at(b"x", u64::MAX).unwrap_err().kind(),
        io::ErrorKind::InvalidInput,
        "u64::MAX would mean the file position to io_uring"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn uring_file_is_shared_by_threads_each_with_its_own_ring() {
    let Some(storage) = uring_or_skip() else {
        return;
    };
    let dir = scratch_dir("uring-threads");
    storage.create_dir_all(&dir).unwrap();
    let f = storage.create(&dir.join("shared")).unwrap();
    const REGION: usize = 256 << 10;
    const PIECE: usize = 16 << 10;
    std::thread::scope(|s| {
        for t in 0..4u8 {
            let f = &f;
            s.spawn(move || {
                let region = pattern(REGION, t);
                let base = t as u64 * REGION as u64;
                for (i, piece) in region.chunks(PIECE).enumerate() {
                    let position = base + (i * PIECE) as u64;
                    if i % 4 == 0 {
                        f.write_at_and_sync(piece, position).unwrap();
                    } else {
                        f.write_at(piece, position).unwrap();
                    }
                }
                f.sync().unwrap();
                let mut back = vec![0u8; REGION];
                assert_eq!(f.read_at(&mut back, base).unwrap(), REGION);
                assert!(back == region, "thread {t} reads back its own region");
            });
        }
    });
    let on_disk = std::fs::read(dir.join("shared")).unwrap();
    assert_eq!(on_disk.len(), 4 * REGION);
    for (t, region) in on_disk.chunks(REGION).enumerate() {
        assert!(region == pattern(REGION, t as u8), "region {t}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sim_backend_meets_the_contract() {
    contract(&SimStorage::new(1), Path::new("/sim/dir"));
}

#[test]
fn crash_keeps_only_what_was_synced() {
    let sim = SimStorage::new(7);
    let dir = Path::new("/d");
    sim.create_dir_all(dir).unwrap();
    let f = sim.create(&dir.join("f")).unwrap();
    f.write_at(b"synced", 0).unwrap();
    f.sync().unwrap();
    f.write_at(b" lost", 6).unwrap();
    sim.crash(false);
    assert_eq!(
        sim.list(dir).unwrap(),
        Vec::<String>::new(),
        "the entry itself was never made durable"
    );

    let f = sim.create(&dir.join("f")).unwrap();
    f.write_at(b"synced", 0).unwrap();
    f.sync().unwrap();
    sim.sync_dir(dir).unwrap();
    f.write_at(b" lost", 6).unwrap();
    sim.create(&dir.join("g")).unwrap();
    assert!(f.read_at(&mut [0u8; 4], 0).is_ok());
    sim.crash(false);
    assert!(
        f.read_at(&mut [0u8; 4], 0).is_err(),
        "handles from before the crash are stale"
    );
    assert_eq!(sim.list(dir).unwrap(), vec!["f".to_string()]);
    assert_eq!(read_file(&sim, &dir.join("f")).unwrap().unwrap(), b"synced");
}

#[test]
fn a_torn_write_keeps_a_sector_aligned_prefix() {
    for seed in 1..50 {
        let sim = SimStorage::new(seed);
        let dir = Path::new("/d");
        sim.create_dir_all(dir).unwrap();
        let f = sim.create(&dir.join("f")).unwrap();
        sim.sync_dir(dir).unwrap();
        f.write_at(&[1u8; 100], 0).unwrap();
        f.sync().unwrap();
        f.write_at(&[2u8; 3000], 100).unwrap();
        sim.crash(true);
        let bytes = read_file(&sim, &dir.join("f")).unwrap().unwrap();
        assert!(
            bytes.len() == 100 || bytes.len().is_multiple_of(512),
            "len {}",
            bytes.len()
        );
        assert!(bytes[..100].iter().all(|&b| b == 1));
        assert!(bytes[100..].iter().all(|&b| b == 2));
    }
}

#[test]
fn faults_fire_at_the_chosen_operation() {
    let sim = SimStorage::new(3);
    let dir = Path::new("/d");
    sim.create_dir_all(dir).unwrap();
    let f = sim.create(&dir.join("f")).unwrap();
    let next = sim.ops() + 1;
    sim.inject(next, Fault::Enospc);
    sim.inject(next + 1, Fault::ShortWrite);
    sim.inject(next + 2, Fault::Eio);
    assert_eq!(f.write_at(b"x", 0).unwrap_err().raw_os_error(), Some(28));
    assert_eq!(f.len().unwrap(), 0, "a failed write changes nothing");
    assert_eq!(
        f.write_at(&[9u8; 2000], 0).unwrap_err().raw_os_error(),
        Some(5)
    );
    assert_eq!(
        f.len().unwrap(),
        512,
        "a short write keeps a sector-aligned prefix"
    );
    assert_eq!(f.sync().unwrap_err().raw_os_error(), Some(5));
    f.sync().unwrap();
}

/// A segment `.log` opened through `open_segment_log`: appends of every size (spilling past `SPILL`),
/// reads of the unflushed tail, syncs, a cut, a trim; the bytes on disk are the log's, then zeros.
/// `o_direct`: the file must be written with `O_DIRECT` (the uring backend on a file system that
/// takes it).
fn segment_log_contract(storage: &dyn Storage, dir: &Path, o_direct: bool) {
    storage.create_dir_all(dir).unwrap();
    let path = dir.join("00000000000000000000.log");
    let f = storage
        .open_segment_log(&path, true, 0, Some(8 << 20))
        .unwrap();
    if o_direct {
        assert_written_with_o_direct(f.as_ref(), &path);
    }
    let mut expected = Vec::new();
    for (i, len) in [
        1usize,
        100,
        4095,
        4097,
        70_000,
        300_000,
        3,
        9000,
        1 << 20,
        17,
    ]
    .into_iter()
    .enumerate()
    {
        let bytes = pattern(len, i as u8);
        f.write_at(&bytes, expected.len() as u64).unwrap();
        expected.extend_from_slice(&bytes);
        let mut back = vec![0u8; expected.len()];
        assert_eq!(f.read_at(&mut back, 0).unwrap(), expected.len());
        assert!(back == expected, "read back after append {i}");
        if i % 3 == 0 {
            f.sync().unwrap();
            let disk = read_file(storage, &path).unwrap().unwrap();
            assert!(disk[..expected.len()] == expected[..], "synced bytes {i}");
            assert!(
                disk[expected.len()..].iter().all(|&b| b == 0),
                "zero tail {i}"
            );
        }
    }
    if f.as_any().is_some() {
        assert!(
            f.write_at(b"x", 5).is_err(),
            "the direct path appends only at the end"
        );
    }
    // A cut into the synced part, then appends again, then the trim of a roll.
    let cut = expected.len() as u64 - 5000;
    f.set_len(cut).unwrap();
    expected.truncate(cut as usize);
    let more = pattern(12_345, 99);
    f.write_at(&more, cut).unwrap();
    expected.extend_from_slice(&more);
    f.set_len(expected.len() as u64).unwrap();
    f.sync().unwrap();
    assert_eq!(f.len().unwrap(), expected.len() as u64);
    assert!(read_file(storage, &path).unwrap().unwrap() == expected);
    drop(f);
    // Reopened at its end: the partial last block comes back into memory and appends continue.
    let f = storage
        .open_segment_log(&path, false, expected.len() as u64, None)
        .unwrap();
    f.write_at(b"tail", expected.len() as u64).unwrap();
    expected.extend_from_slice(b"tail");
    f.sync().unwrap();
    let disk = read_file(storage, &path).unwrap().unwrap();
    assert!(disk[..expected.len()] == expected[..]);
    storage.remove(&path).unwrap();
}

#[test]
fn segment_logs_meet_the_contract_on_every_backend() {
    let dir = scratch_dir("segment-std");
    segment_log_contract(&StdStorage, &dir, false);
    std::fs::remove_dir_all(&dir).unwrap();
    segment_log_contract(&SimStorage::new(7), Path::new("/seg"), false);
    segment_log_contract(
        &SimStorage::new(7).with_direct_writes(),
        Path::new("/seg"),
        false,
    );
    if let Some(storage) = uring_or_skip() {
        // On a file system that takes O_DIRECT, so the contract is the direct path's, not the fallback's.
        let direct = direct_scratch_dir("segment-uring");
        let dir = direct
            .clone()
            .unwrap_or_else(|| scratch_dir("segment-uring"));
        segment_log_contract(storage.as_ref(), &dir, direct.is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_direct_segment_that_failed_to_sync_refuses_every_later_call() {
    let sim = SimStorage::new(3).with_direct_writes();
    sim.create_dir_all(Path::new("/d")).unwrap();
    let path = Path::new("/d/00000000000000000000.log");
    let f = sim.open_segment_log(path, true, 0, None).unwrap();
    f.write_at(&pattern(5000, 1), 0).unwrap();
    f.sync().unwrap();
    f.write_at(&pattern(100, 2), 5000).unwrap();
    sim.inject(sim.ops() + 1, Fault::Eio);
    assert!(f.sync().is_err());
    // The pages of a failed write may be gone: a second sync must not pretend they are durable.
    let again = f.sync().unwrap_err();
    assert!(
        again.to_string().contains("earlier write or sync"),
        "{again}"
    );
    assert!(f.write_at(b"x", 5100).is_err());
}

/// A cut below the block in memory reads the new last partial block from the device; when that read
/// fails, the cut did not happen and the tail in memory no longer says what the device holds: the file
/// is failed, as after a failed write, and refuses every later call.
#[test]
fn a_direct_segment_whose_cut_failed_to_read_refuses_every_later_call() {
    let (sim, f, _) = direct_segment(4);
    f.write_at(&pattern(20_000, 1), 0).unwrap();
    f.sync().unwrap();
    // Every later device call of this handle fails (a stale handle reads nothing).
    sim.crash(false);
    assert!(f.set_len(100).is_err(), "the cut's read fails");
    let refused = f.write_at(b"x", 100);
    assert!(
        refused.is_err(),
        "an append after a failed cut was taken into memory"
    );
    assert!(f.sync().is_err());
}

/// Partitions appended to, then flushed together: every partition's recovery point reaches its log
/// end, what they flushed survives a crash, and on the direct path all their writes went in at most two
/// batches (the zero fill ahead, then the data), however many partitions.
fn flush_together(storage: Arc<dyn Storage>, root: &Path, sim: Option<&SimStorage>) {
    use crate::format::{BatchBuilder, Compression};
    use crate::partition_log::{OpenOptions, PartitionLog};
    let logs: Vec<PartitionLog> = (0..16)
        .map(|p| {
            let dir = root.join(format!("t-{p}"));
            PartitionLog::open(
                storage.clone(),
                &dir,
                crate::config::LogConfig::default(),
                OpenOptions::default(),
            )
            .unwrap()
            .0
        })
        .collect();
    for (p, log) in logs.iter().enumerate() {
        for i in 0..=p {
            let mut b = BatchBuilder::new(Compression::None);
            b.append(0, None, Some(&pattern(100 + 37 * i, p as u8)), &[])
                .unwrap();
            log.append_as_leader(&mut b.build().unwrap(), 0).unwrap();
        }
    }
    let before = sim.map(SimStorage::batches);
    let refs: Vec<&PartitionLog> = logs.iter().collect();
    PartitionLog::flush_many(&refs).unwrap();
    if let (Some(sim), Some(before)) = (sim, before) {
        assert!(
            sim.batches() - before <= 2,
            "16 partitions flushed in {} batches",
            sim.batches() - before
        );
    }
    for (p, log) in logs.iter().enumerate() {
        assert_eq!(log.recovery_point(), p as i64 + 1, "partition {p}");
    }
    let Some(sim) = sim else { return };
    drop(logs);
    sim.crash(true);
    for p in 0..16 {
        let dir = root.join(format!("t-{p}"));
        let options = OpenOptions {
            recovery_point: p + 1,
            log_start_offset: 0,
            clean_shutdown: false,
        };
        let (log, _) = PartitionLog::open(
            storage.clone(),
            &dir,
            crate::config::LogConfig::default(),
            options,
        )
        .unwrap();
        assert_eq!(log.log_end_offset(), p + 1, "partition {p} after the crash");
    }
}

#[test]
fn partitions_flushed_together_are_durable_on_every_backend() {
    let sim = SimStorage::new(11).with_direct_writes();
    flush_together(Arc::new(sim.clone()), Path::new("/together"), Some(&sim));
    let dir = scratch_dir("together-std");
    flush_together(Arc::new(StdStorage), &dir, None);
    std::fs::remove_dir_all(&dir).unwrap();
    if let Some(storage) = uring_or_skip() {
        let dir =
            direct_scratch_dir("together-uring").unwrap_or_else(|| scratch_dir("together-uring"));
        flush_together(storage, &dir, None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// Logs flushed by `flush_each` on a storage that syncs one file at a time (so on threads): each log
/// gets its own result, a log that failed a write fails alone, and every other log's flush is durable.
#[test]
fn flush_each_reports_each_log_and_a_failed_log_fails_alone() {
    use crate::format::{BatchBuilder, Compression};
    use crate::partition_log::{OpenOptions, PartitionLog};
    let sim = SimStorage::new(5);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let dir = |p: usize| PathBuf::from(format!("/each/t-{p}"));
    let open = |p: usize, options: OpenOptions| {
        let config = crate::config::LogConfig::default();
        PartitionLog::open(storage.clone(), &dir(p), config, options)
            .unwrap()
            .0
    };
    let append = |log: &PartitionLog, p: usize| {
        let mut b = BatchBuilder::new(Compression::None);
        b.append(0, None, Some(&pattern(100, p as u8)), &[])
            .unwrap();
        log.append_as_leader(&mut b.build().unwrap(), 0)
    };
    let logs: Vec<PartitionLog> = (0..20).map(|p| open(p, OpenOptions::default())).collect();
    for (p, log) in logs.iter().enumerate() {
        if p == 7 {
            sim.inject(sim.ops() + 1, Fault::Eio);
            assert!(
                append(log, p).is_err(),
                "the injected fault fails the append"
            );
        } else {
            append(log, p).unwrap();
        }
    }
    let results = PartitionLog::flush_each(&logs.iter().collect::<Vec<_>>());
    assert_eq!(results.len(), 20);
    for (p, r) in results.iter().enumerate() {
        assert_eq!(r.is_err(), p == 7, "partition {p}: {r:?}");
    }
    drop(logs);
    sim.crash(true);
    for p in (0..20).filter(|p| *p != 7) {
        let options = OpenOptions {
            recovery_point: 1,
            log_start_offset: 0,
            clean_shutdown: false,
        };
        assert_eq!(
            open(p, options).log_end_offset(),
            1,
            "partition {p} after the crash"
        );
    }
}

/// A direct segment `.log` on a fresh simulated disk.
fn direct_segment(seed: u64) -> (SimStorage, Arc<dyn StorageFile>, PathBuf) {
    let sim = SimStorage::new(seed).with_direct_writes();
    sim.create_dir_all(Path::new("/g")).unwrap();
    let path = PathBuf::from("/g/00000000000000000000.log");
    let f = sim.open_segment_log(&path, true, 0, None).unwrap();
    sim.sync_dir(Path::new("/g")).unwrap();
    (sim, f, path)
}

/// Group commit on the direct path: a group of 8 batches of 16 KiB (8 chunks in flight), and the zero
/// fill ahead of them, made durable by ONE device flush. On a device without FUA every `RWF_DSYNC`
/// write is a cache flush of its own: the group used to cost 8 of them, and the fill 4 more.
#[test]
fn a_group_of_eight_chunks_costs_one_device_flush() {
    let (sim, f, path) = direct_segment(21);
    let mut expected = Vec::new();
    for round in 0..3u8 {
        for i in 0..8u8 {
            let batch = pattern(16 << 10, round * 8 + i);
            f.write_at(&batch, expected.len() as u64).unwrap();
            expected.extend_from_slice(&batch);
        }
        let before = sim.device_flushes();
        f.sync().unwrap();
        assert_eq!(
            sim.device_flushes() - before,
            1,
            "round {round}: device flushes for one group"
        );
    }
    let before = sim.device_flushes();
    f.sync().unwrap();
    assert_eq!(sim.device_flushes(), before, "nothing changed: no flush");
    sim.crash(true);
    let disk = read_file(&sim, &path).unwrap().unwrap();
    assert!(disk[..expected.len()] == expected[..], "the groups survive");
    assert!(
        disk[expected.len()..].iter().all(|&b| b == 0),
        "then the synced zero fill"
    );
}

/// What was written but not synced (a spill, the zero fill ahead of it) is at the mercy of a crash:
/// each write lands whole, torn, or not at all. What was synced before survives byte for byte, and no
/// unsynced write changes it (the padded last block is rewritten with identical first bytes).
#[test]
fn a_crash_keeps_every_synced_byte_whatever_unsynced_writes_land() {
    let mut outcomes = std::collections::BTreeSet::new();
    for seed in 1..60 {
        let (sim, f, path) = direct_segment(seed);
        let synced = pattern(10_000 + seed as usize * 37, seed as u8);
        f.write_at(&synced, 0).unwrap();
        f.sync().unwrap();
        // More than SPILL pending: written out (and zero-filled ahead), not synced.
        let spilled = pattern(direct::SPILL + 5000, 200);
        f.write_at(&spilled, synced.len() as u64).unwrap();
        sim.crash(true);
        let disk = read_file(&sim, &path).unwrap().unwrap();
        assert!(
            disk.len() >= synced.len() && disk[..synced.len()] == synced[..],
            "seed {seed}: the synced bytes"
        );
        // Past them: a prefix of the spill (whole sectors of it), then zeros or nothing.
        let rest = &disk[synced.len()..];
        let kept = rest
            .iter()
            .zip(&spilled)
            .take_while(|(a, b)| a == b)
            .count();
        outcomes.insert(kept == 0);
        for (i, (&a, &b)) in rest.iter().zip(spilled.iter()).enumerate().skip(kept) {
            assert!(
                a == 0 || a == b,
                "seed {seed}: byte {i} past the sync is {a}"
            );
        }
    }
    assert_eq!(
        outcomes.len(),
        2,
        "some seeds lose the unsynced spill, some keep part of it"
    );
}

/// A batch of writes issued once the power is out was never in flight: nothing of it reaches the disk.
/// (Only the batch the power cuts lands whole, torn or not at all.) The crash simulation's direct path
/// needs this: a log dropped after its storage died writes its tail out, and that write must not land.
#[test]
fn a_write_issued_after_the_power_went_out_lands_nothing() {
    for seed in 1..30 {
        let (sim, f, path) = direct_segment(seed);
        let synced = pattern(5000 + seed as usize * 13, seed as u8);
        f.write_at(&synced, 0).unwrap();
        f.sync().unwrap();
        sim.power_off_at(sim.ops() + 1);
        // The power goes out at another operation first.
        assert!(sim.sync_dir(Path::new("/g")).is_err());
        let late = pattern(9000, 77);
        f.write_at(&late, synced.len() as u64).unwrap();
        assert!(f.sync().is_err(), "seed {seed}: a sync with the power off");
        sim.crash(true);
        let disk = read_file(&sim, &path).unwrap().unwrap();
        assert!(
            disk.len() >= synced.len() && disk[..synced.len()] == synced[..],
            "seed {seed}: the synced bytes"
        );
        assert!(
            disk[synced.len()..].iter().all(|&b| b == 0),
            "seed {seed}: bytes written after the power went out reached the disk"
        );
    }
}

/// Two appenders of one file flushing at once: each flush's claim is what had completed when its
/// fdatasync was issued, so whichever returns, its bytes survive a crash right after it.
#[test]
fn concurrent_syncs_of_one_direct_file_each_cover_their_own_writes() {
    let (sim, f, path) = direct_segment(5);
    let end = Arc::new(std::sync::Mutex::new(Vec::new()));
    std::thread::scope(|s| {
        for t in 0..4u8 {
            let (f, end) = (&f, &end);
            s.spawn(move || {
                for i in 0..20u8 {
                    let bytes = pattern(3000 + 100 * t as usize, t * 20 + i);
                    {
                        let mut log = end.lock().unwrap();
                        f.write_at(&bytes, log.len() as u64).unwrap();
                        log.extend_from_slice(&bytes);
                    }
                    f.sync().unwrap();
                }
            });
        }
    });
    let expected = end.lock().unwrap().clone();
    sim.crash(true);
    let disk = read_file(&sim, &path).unwrap().unwrap();
    assert!(disk[..expected.len()] == expected[..]);
}

/// Group commit with flushes overlapping (one gathering and writing while another syncs): every flush
/// returns with the recovery point at or past its offset, the recovery point never moves back, and a
/// crash after the appenders stop keeps every batch any flush covered.
#[test]
fn overlapping_flushes_of_one_log_claim_only_what_is_durable() {
    use crate::format::{BatchBuilder, Compression};
    use crate::partition_log::{OpenOptions, PartitionLog};
    use std::sync::atomic::Ordering;
    let sim = SimStorage::new(17).with_direct_writes();
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let dir = Path::new("/overlap/t-0");
    let config = crate::config::LogConfig::default();
    let (log, _) =
        PartitionLog::open(storage.clone(), dir, config.clone(), OpenOptions::default()).unwrap();
    let flushed = std::sync::atomic::AtomicI64::new(0);
    std::thread::scope(|s| {
        for t in 0..8u8 {
            let (log, flushed) = (&log, &flushed);
            s.spawn(move || {
                for i in 0..25u8 {
                    let mut b = BatchBuilder::new(Compression::None);
                    b.append(0, None, Some(&pattern(3000, t ^ i)), &[]).unwrap();
                    let info = log.append_as_leader(&mut b.build().unwrap(), 0).unwrap();
                    let before = log.recovery_point();
                    log.flush(info.last_offset + 1).unwrap();
                    let after = log.recovery_point();
                    assert!(after > info.last_offset, "the flush covers its append");
                    assert!(after >= before, "the recovery point never moves back");
                    flushed.fetch_max(info.last_offset + 1, Ordering::AcqRel);
                }
            });
        }
    });
    let flushed = flushed.load(Ordering::Acquire);
    assert_eq!(flushed, 200);
    drop(log);
    sim.crash(true);
    let options = OpenOptions {
        recovery_point: flushed,
        log_start_offset: 0,
        clean_shutdown: false,
    };
    let (log, _) = PartitionLog::open(storage, dir, config, options).unwrap();
    assert_eq!(
        log.log_end_offset(),
        flushed,
        "every flushed batch survives"
    );
}
