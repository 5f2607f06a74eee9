//! Reads by offset against a model: every offset of a multi-segment log, read through the index
//! lookup (`PartitionLog::read`), returns exactly the bytes the model says, the whole batches from the one
//! holding the offset, as many as `max_bytes` allows (one at least), never past the segment's end.
//!
//! The batches vary in size (a few hundred bytes to a few KiB) so that index entries fall on some
//! batches and not others and lookups walk several headers, land on an entry's batch, or on the batch
//! after one. The same reads run on the std backend twice (the second pass reads sealed segments
//! through their maps) and on the simulated backend (every header by `pread`), after a truncation and
//! appends after it, and while the oldest segments are deleted under a reader holding their bytes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Batches, Compression};
use klog_log::io::{SimStorage, StdStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog};
use klog_log::KafkaError;

/// One appended batch: its offsets and its bytes as the log holds them.
#[derive(Debug, Clone)]
struct Appended {
    base: i64,
    last: i64,
    bytes: Vec<u8>,
}

/// The log as a list of batches, and where its segments start.
struct Model {
    batches: Vec<Appended>,
}

impl Model {
    /// What `read(offset, max_bytes, None, true)` returns: the batch holding `offset` (the first
    /// whose last offset is >= it), then the batches after it in the same segment while they fit.
    fn read(&self, bases: &[i64], offset: i64, max_bytes: usize) -> Vec<u8> {
        let Some(first) = self.batches.iter().position(|b| b.last >= offset) else {
            return Vec::new();
        };
        let segment_of = |base: i64| bases.iter().rev().find(|s| **s <= base).copied();
        let segment = segment_of(self.batches[first].base);
        let mut out = self.batches[first].bytes.clone();
        for b in &self.batches[first + 1..] {
            if segment_of(b.base) != segment || out.len() + b.bytes.len() > max_bytes {
                break;
            }
            out.extend_from_slice(&b.bytes);
        }
        out
    }
}

fn config(index_interval_bytes: u32) -> LogConfig {
    let interval = format!("index.interval.bytes={index_interval_bytes}");
    // No retention by time: the batches carry a fixed timestamp of 2023.
    LogConfig::from_pairs(["segment.bytes=32768", "retention.ms=-1", interval.as_str()]).unwrap()
}

/// xorshift64*: sizes and values that differ from batch to batch, the same in every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Appends `count` batches of 1 to 8 records of 20 to 900 bytes each, recording each as the log
/// stored it (its base offset assigned).
fn append(log: &PartitionLog, model: &mut Model, rng: &mut Rng, count: usize) {
    for _ in 0..count {
        let mut b = BatchBuilder::new(Compression::None);
        let records = 1 + rng.next() % 8;
        for _ in 0..records {
            let len = 20 + (rng.next() % 880) as usize;
            let value: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            b.append(1_700_000_000_000, None, Some(&value), &[])
                .unwrap();
        }
        let mut bytes = b.build().unwrap();
        log.append_as_leader(&mut bytes, 0).unwrap();
        let batch = Batches::new(&bytes).next().unwrap().unwrap();
        model.batches.push(Appended {
            base: batch.base_offset(),
            last: batch.last_offset(),
            bytes: bytes.clone(),
        });
    }
}

/// Every offset from the log start to the log end, read with a small and a large `max_bytes`, equals
/// the model; the log end reads nothing.
fn check_every_offset(log: &PartitionLog, model: &Model, what: &str) {
    let bases = log.segment_base_offsets();
    let leo = log.log_end_offset();
    for max_bytes in [1usize, 6000, 1 << 20] {
        for offset in log.log_start_offset()..=leo {
            let info = log.read(offset, max_bytes, None, true).unwrap();
            let want = model.read(&bases, offset, max_bytes);
            let got = info.records.as_slice();
            assert!(
                got == want.as_slice(),
                "{what}: read({offset}, {max_bytes}) returned {} bytes, the model {}",
                got.len(),
                want.len()
            );
            let next = Batches::new(got)
                .last()
                .map_or(offset, |b| b.unwrap().last_offset() + 1);
            assert_eq!(
                info.next_offset, next,
                "{what}: next offset of read({offset})"
            );
        }
    }
}

fn open(storage: Arc<dyn Storage>, dir: &Path, index_interval_bytes: u32) -> PartitionLog {
    let opts = OpenOptions::default();
    PartitionLog::open(storage, dir, config(index_interval_bytes), opts)
        .unwrap()
        .0
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn every_offset_reads_the_models_bytes_on_every_backend_and_index_interval() {
    for interval in [1u32, 4096, 1 << 20] {
        let dir = scratch(&format!("read-lookup-std-{interval}"));
        let logs = [
            (
                open(Arc::new(StdStorage), &dir.join("t-0"), interval),
                "std",
            ),
            (
                open(
                    Arc::new(SimStorage::new(7)),
                    &PathBuf::from(format!("/sim/read-lookup/t-{interval}")),
                    interval,
                ),
                "sim",
            ),
        ];
        for (log, backend) in &logs {
            let mut model = Model {
                batches: Vec::new(),
            };
            append(log, &mut model, &mut Rng(0x9e37_79b9_7f4a_7c15), 300);
            assert!(log.segment_base_offsets().len() >= 5, "several segments");
            for pass in 0..2 {
                let what = format!("{backend}, index.interval.bytes={interval}, pass {pass}");
                check_every_offset(log, &model, &what);
            }
        }
        for (log, _) in logs {
            log.close().unwrap();
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn reads_after_a_truncation_and_the_appends_after_it_match_the_model() {
    let dir = scratch("read-lookup-truncate");
    let log = open(Arc::new(StdStorage), &dir.join("t-0"), 4096);
    let mut model = Model {
        batches: Vec::new(),
    };
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    append(&log, &mut model, &mut rng, 200);
    check_every_offset(&log, &model, "before the truncation"); // maps the sealed segments
                                                               // Into a sealed segment, at a batch's base: the batches from it on are gone.
    let cut = model.batches[model.batches.len() / 2].base;
    log.truncate_to(cut).unwrap();
    model.batches.retain(|b| b.base < cut);
    assert_eq!(log.log_end_offset(), cut);
    check_every_offset(&log, &model, "after the truncation");
    append(&log, &mut model, &mut rng, 100);
    check_every_offset(&log, &model, "after appends past the truncation");
    log.close().unwrap();
    drop(log);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_reader_keeps_the_bytes_of_a_segment_deleted_under_it() {
    let dir = scratch("read-lookup-delete");
    let log = open(Arc::new(StdStorage), &dir.join("t-0"), 4096);
    let mut model = Model {
        batches: Vec::new(),
    };
    append(&log, &mut model, &mut Rng(0x5851_f42d_4c95_7f2d), 200);
    log.update_high_watermark(log.log_end_offset());
    let bases = log.segment_base_offsets();
    // Bytes of the first two segments, held (as maps) while those segments are deleted.
    let held: Vec<(i64, Vec<u8>, _)> = [bases[0] + 3, bases[1] + 1]
        .into_iter()
        .map(|o| {
            let info = log.read(o, 1 << 20, None, true).unwrap();
            assert!(
                info.records.is_mapped(),
                "a sealed segment reads from its map"
            );
            (o, model.read(&bases, o, 1 << 20), info.records)
        })
        .collect();
    log.increment_log_start_offset(bases[2]).unwrap();
    assert_eq!(log.delete_old_segments().unwrap(), vec![bases[0], bases[1]]);
    for (offset, want, bytes) in &held {
        assert!(
            bytes.as_slice() == want.as_slice(),
            "bytes read at {offset} before its segment was deleted"
        );
    }
    let below = log.read(bases[2] - 1, 1 << 20, None, true).unwrap_err();
    assert_eq!(below.kafka_error(), KafkaError::OffsetOutOfRange);
    model.batches.retain(|b| b.base >= bases[2]);
    check_every_offset(&log, &model, "after the deletion");
    log.close().unwrap();
    drop(log);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `offset_for_timestamp` of every timestamp from before the first record to after the last, in a log of
/// several segments whose record timestamps mostly grow but jump back now and then (CreateTime):
/// the first record in offset order whose timestamp is >= the target, as the model finds it.
#[test]
fn offset_for_timestamp_of_every_timestamp_is_the_first_record_at_or_after_it() {
    let dir = scratch("read-lookup-timestamps");
    for (interval, backend) in [(1u32, "std"), (4096, "std"), (4096, "sim")] {
        let path = dir.join(format!("t-{interval}"));
        let log = match backend {
            "std" => open(Arc::new(StdStorage), &path, interval),
            _ => open(Arc::new(SimStorage::new(11)), &path, interval),
        };
        let mut rng = Rng(0x1234_5678_9abc_def1);
        let mut records: Vec<(i64, i64)> = Vec::new(); // (offset, timestamp)
        let mut clock = 1_700_000_000_000i64;
        for _ in 0..250 {
            let mut b = BatchBuilder::new(Compression::None);
            let count = 1 + rng.next() % 6;
            let mut stamps = Vec::new();
            for _ in 0..count {
                clock += (rng.next() % 4) as i64;
                let back = rng.next().is_multiple_of(8) as i64 * (rng.next() % 40) as i64;
                let ts = clock - back;
                let value = vec![b'v'; 50 + (rng.next() % 700) as usize];
                b.append(ts, None, Some(&value), &[]).unwrap();
                stamps.push(ts);
            }
            let base = log.log_end_offset();
            log.append_as_leader(&mut b.build().unwrap(), 0).unwrap();
            records.extend(
                stamps
                    .into_iter()
                    .enumerate()
                    .map(|(i, t)| (base + i as i64, t)),
            );
        }
        assert!(log.segment_base_offsets().len() >= 4, "several segments");
        let (first, last) = (records[0].1, records.iter().map(|r| r.1).max().unwrap());
        for pass in 0..2 {
            for ts in first - 50..=last + 2 {
                let want = records.iter().find(|r| r.1 >= ts).map(|r| (r.1, r.0));
                let got = log.offset_for_timestamp(ts).unwrap();
                assert_eq!(
                    got, want,
                    "{backend}, interval {interval}, pass {pass}: ts {ts}"
                );
            }
        }
        log.close().unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
