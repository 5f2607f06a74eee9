//! Two cleaned partition directories compared batch by batch, as issue #27 judges klog's cleaner against
//! a Kafka broker's: every segment's batches byte-identical where the bytes are fully specified (an
//! uncompressed batch, or a batch the cleaner kept whole: its bytes are the pre-clean copy's), and
//! record-identical where a codec library chose the bytes (a recompressed batch: every header field but
//! CRC and length, then every record); the `.txnindex` byte-identical; the `.index` and `.timeindex`
//! byte-identical when the `.log`s are, else each one what Kafka 4.4.0's per-batch index rule
//! (`LogSegment.append`, KAFKA-806) writes over its own `.log`.
//!
//! A difference is a line naming the segment, the batch's base offset and position, the field, and both
//! values in hex: evidence to report, never a panic in the middle of the walk.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use klog::log::format::{AnyBatch, Batches, Compression, RecordBatch};

/// One segment's files (the `.txnindex` only when present) and the `.log`'s modification time in ms.
pub struct SegmentFiles {
    pub log: Vec<u8>,
    pub index: Vec<u8>,
    pub timeindex: Vec<u8>,
    pub txnindex: Option<Vec<u8>>,
    pub log_mtime_ms: i64,
}

/// The live segments of a partition directory (`<20 digits>.log`, no `.cleaned`/`.swap`/`.deleted`
/// suffix) by base offset.
pub fn segments(dir: &Path) -> BTreeMap<i64, SegmentFiles> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let name = entry.expect("a directory entry").file_name();
        let name = name.to_string_lossy();
        let Some(stem) = name.strip_suffix(".log") else {
            continue;
        };
        let Ok(base) = stem.parse::<i64>() else {
            continue;
        };
        let read = |suffix: &str| std::fs::read(dir.join(format!("{stem}{suffix}")));
        let log_mtime_ms = std::fs::metadata(dir.join(&*name))
            .and_then(|m| m.modified())
            .map(|t| {
                t.duration_since(std::time::UNIX_EPOCH)
                    .expect("after 1970")
                    .as_millis() as i64
            })
            .expect("a modification time");
        let files = SegmentFiles {
            log: read(".log").expect("read a .log"),
            index: read(".index").unwrap_or_default(),
            timeindex: read(".timeindex").unwrap_or_default(),
            txnindex: read(".txnindex").ok(),
            log_mtime_ms,
        };
        out.insert(base, files);
    }
    out
}

/// Every v2 batch of a `.log` (a v0/v1 entry or a corrupt batch is a panic: no cleaner writes one).
pub fn batches(log: &[u8]) -> Vec<RecordBatch<'_>> {
    Batches::new(log)
        .map(|b| match b {
            Ok(AnyBatch::V2(batch)) => batch,
            Ok(AnyBatch::Legacy(e)) => panic!("a v0/v1 entry at position {}", e.position()),
            Err(e) => panic!("a batch that does not parse: {e}"),
        })
        .collect()
}

/// What a comparison found: the differences, and how each batch pair was judged.
#[derive(Debug, Default)]
pub struct Comparison {
    pub differences: Vec<String>,
    /// Batch pairs required byte-identical (uncompressed or kept whole) and found so.
    pub byte_identical: usize,
    /// Recompressed batch pairs found record-identical.
    pub record_identical: usize,
    /// Of those, the ones whose bytes were identical too.
    pub recompressed_bytes_equal: usize,
    /// Recompressed record-identical pairs by codec: (bytes identical, bytes differing).
    pub recompressed_by_codec: BTreeMap<String, (usize, usize)>,
    /// Segments whose `.log`s differ (their indexes were judged by Kafka's rule).
    pub logs_differing: usize,
    /// Segments whose `.log` modification times differ (Kafka gives a cleaned segment its group's last
    /// segment's; klog's storage seam keeps none, a documented difference).
    pub mtimes_differing: usize,
}

/// Compares the partition directory `klog` with `broker` (the reference), both cleaned from `pre` (the
/// pre-clean copy, which tells a batch kept whole from a rebuilt one), with Kafka's index rule at
/// `index_interval_bytes` (`index.interval.bytes`); only the segments based below `below` when given
/// (the cleaned range, where one side was appended to since).
pub fn compare(
    pre: &Path,
    broker: &Path,
    klog: &Path,
    index_interval_bytes: u32,
    below: Option<i64>,
) -> Comparison {
    let pre_batches: BTreeSet<Vec<u8>> = segments(pre)
        .values()
        .flat_map(|s| {
            batches(&s.log)
                .iter()
                .map(|b| b.as_bytes().to_vec())
                .collect::<Vec<_>>()
        })
        .collect();
    let in_range = |m: BTreeMap<i64, SegmentFiles>| -> BTreeMap<i64, SegmentFiles> {
        m.into_iter()
            .filter(|(base, _)| below.is_none_or(|b| *base < b))
            .collect()
    };
    let (ours, theirs) = (in_range(segments(klog)), in_range(segments(broker)));
    let mut out = Comparison::default();
    let names = |m: &BTreeMap<i64, SegmentFiles>| m.keys().copied().collect::<Vec<_>>();
    if names(&ours) != names(&theirs) {
        out.differences.push(format!(
            "segments: broker {:?}, klog {:?}",
            names(&theirs),
            names(&ours)
        ));
    }
    for (base, expected) in &theirs {
        if let Some(actual) = ours.get(base) {
            let name = format!("{base:020}");
            compare_segment(&name, expected, actual, &pre_batches, &mut out);
            compare_indexes(
                &name,
                *base,
                expected,
                actual,
                index_interval_bytes,
                &mut out,
            );
        }
    }
    out
}

fn compare_segment(
    name: &str,
    expected: &SegmentFiles,
    actual: &SegmentFiles,
    pre_batches: &BTreeSet<Vec<u8>>,
    out: &mut Comparison,
) {
    // klog keeps no file mtimes (docs/compaction.md): counted, not a difference of the bytes.
    if expected.log_mtime_ms != actual.log_mtime_ms {
        out.mtimes_differing += 1;
    }
    let (theirs, ours) = (batches(&expected.log), batches(&actual.log));
    if theirs.len() != ours.len() {
        out.differences.push(format!(
            "{name}.log: broker has {} batches, klog {} (first base offsets: broker {:?}, klog {:?})",
            theirs.len(),
            ours.len(),
            theirs.iter().map(|b| b.base_offset()).collect::<Vec<_>>(),
            ours.iter().map(|b| b.base_offset()).collect::<Vec<_>>(),
        ));
    }
    for (expected, actual) in theirs.iter().zip(&ours) {
        let whole = pre_batches.contains(expected.as_bytes());
        let uncompressed = expected.compression().ok() == Some(Compression::None);
        let at = format!(
            "{name}.log batch at base offset {} (broker position {}, klog position {})",
            expected.base_offset(),
            expected.position(),
            actual.position()
        );
        let before = out.differences.len();
        if whole || uncompressed {
            if expected.as_bytes() == actual.as_bytes() {
                out.byte_identical += 1;
                continue;
            }
            let why = if whole { "kept whole" } else { "uncompressed" };
            out.differences
                .push(format!("{at}: {why}, so byte-identical, but differs"));
            header_differences(&at, expected, actual, true, &mut out.differences);
            if out.differences.len() == before + 1 {
                out.differences.push(format!(
                    "{at}: first differing byte at {}",
                    first_difference(expected.as_bytes(), actual.as_bytes())
                ));
            }
            record_differences(&at, expected, actual, &mut out.differences);
            continue;
        }
        header_differences(&at, expected, actual, false, &mut out.differences);
        record_differences(&at, expected, actual, &mut out.differences);
        if out.differences.len() == before {
            out.record_identical += 1;
            let codec = expected.compression().map_or("?".into(), |c| c.to_string());
            let tally = out.recompressed_by_codec.entry(codec).or_default();
            if expected.as_bytes() == actual.as_bytes() {
                out.recompressed_bytes_equal += 1;
                tally.0 += 1;
            } else {
                tally.1 += 1;
            }
        }
    }
}

fn first_difference(a: &[u8], b: &[u8]) -> usize {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()))
}

/// Every header field that differs, as `field: broker 0x.., klog 0x..` (CRC and length only when
/// `with_crc_and_length`).
fn header_differences(
    at: &str,
    expected: &RecordBatch<'_>,
    actual: &RecordBatch<'_>,
    with_crc_and_length: bool,
    out: &mut Vec<String>,
) {
    let fields = |b: &RecordBatch<'_>| {
        let mut v: Vec<(&str, i64, usize)> = vec![
            ("base_offset", b.base_offset(), 16),
            (
                "partition_leader_epoch",
                b.partition_leader_epoch().into(),
                8,
            ),
            ("magic", b.magic().into(), 2),
            ("attributes", b.header().attributes.get().into(), 4),
            ("last_offset_delta", b.last_offset_delta().into(), 8),
            ("base_timestamp", b.base_timestamp(), 16),
            ("max_timestamp", b.max_timestamp(), 16),
            ("producer_id", b.producer_id(), 16),
            ("producer_epoch", b.producer_epoch().into(), 4),
            ("base_sequence", b.base_sequence().into(), 8),
            ("records_count", b.records_count().into(), 8),
        ];
        if with_crc_and_length {
            v.push(("batch_length", b.batch_length().into(), 8));
            v.push(("crc", b.crc().into(), 8));
        }
        v
    };
    for ((field, theirs, width), (_, ours, _)) in fields(expected).into_iter().zip(fields(actual)) {
        if theirs != ours {
            let hex = |v: i64| {
                let bits = (v as u64) & (u64::MAX >> (64 - 4 * width as u32));
                format!("0x{bits:0width$x}")
            };
            out.push(format!(
                "{at}: {field}: broker {} ({theirs}), klog {} ({ours})",
                hex(theirs),
                hex(ours)
            ));
        }
    }
}

/// A record as the comparison sees it: offset, timestamp, attributes, key, value, headers.
type OwnedRecord = (
    i64,
    i64,
    i8,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(Vec<u8>, Option<Vec<u8>>)>,
);

/// A batch's records, or why they could not be read.
pub fn owned_records(batch: &RecordBatch<'_>) -> Result<Vec<OwnedRecord>, String> {
    let mut scratch = Vec::new();
    let records = batch.records(&mut scratch).map_err(|e| e.to_string())?;
    records
        .map(|r| {
            let r = r.map_err(|e| e.to_string())?;
            let headers = r
                .headers
                .clone()
                .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                .collect();
            Ok((
                r.offset,
                r.timestamp,
                r.attributes,
                r.key.map(<[u8]>::to_vec),
                r.value.map(<[u8]>::to_vec),
                headers,
            ))
        })
        .collect()
}

fn record_differences(
    at: &str,
    expected: &RecordBatch<'_>,
    actual: &RecordBatch<'_>,
    out: &mut Vec<String>,
) {
    let (theirs, ours) = match (owned_records(expected), owned_records(actual)) {
        (Ok(t), Ok(o)) => (t, o),
        (t, o) => {
            out.push(format!(
                "{at}: records unreadable: broker {:?}, klog {:?}",
                t.err(),
                o.err()
            ));
            return;
        }
    };
    if theirs.len() != ours.len() {
        out.push(format!(
            "{at}: broker keeps {} records ({:?}), klog {} ({:?})",
            theirs.len(),
            theirs.iter().map(|r| r.0).collect::<Vec<_>>(),
            ours.len(),
            ours.iter().map(|r| r.0).collect::<Vec<_>>()
        ));
        return;
    }
    for (t, o) in theirs.iter().zip(&ours) {
        if t != o {
            out.push(format!(
                "{at}: record at offset {}: broker {t:?}, klog {o:?}",
                t.0
            ));
        }
    }
}

fn compare_indexes(
    name: &str,
    base: i64,
    expected: &SegmentFiles,
    actual: &SegmentFiles,
    index_interval_bytes: u32,
    out: &mut Comparison,
) {
    if expected.txnindex != actual.txnindex {
        out.differences.push(format!(
            "{name}.txnindex: broker {:?}, klog {:?}",
            expected.txnindex.as_deref().map(hex),
            actual.txnindex.as_deref().map(hex)
        ));
    }
    let pairs = [
        ("index", &expected.index, &actual.index),
        ("timeindex", &expected.timeindex, &actual.timeindex),
    ];
    if expected.log == actual.log {
        for (kind, theirs, ours) in pairs {
            if theirs != ours {
                out.differences.push(format!(
                    "{name}.{kind} (the .logs are identical): broker {}, klog {}",
                    hex(theirs),
                    hex(ours)
                ));
            }
        }
        return;
    }
    out.logs_differing += 1;
    for (who, files) in [("broker", expected), ("klog", actual)] {
        let (index, timeindex) = kafka_indexes(&files.log, base, index_interval_bytes);
        for (kind, written, rule) in [
            ("index", &files.index, index),
            ("timeindex", &files.timeindex, timeindex),
        ] {
            if *written != rule {
                out.differences.push(format!(
                    "{name}.{kind} ({who}'s): written {}, Kafka's rule over its .log gives {}",
                    hex(written),
                    hex(&rule)
                ));
            }
        }
    }
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `.index` and `.timeindex` bytes Kafka 4.4.0 writes for a segment whose `.log` is `log`, appended
/// batch by batch into a new segment and then made inactive (a cleaned segment): per batch, the max
/// timestamp so far rises on a strictly greater batch max timestamp (with that batch's last offset);
/// once more than `index_interval_bytes` were appended since the last entry, an offset entry
/// (last offset, position) and a time entry (the max so far, if above the last one); the batch's size
/// counted after; on close a final time entry, if above the last one. Offsets are relative to the
/// segment's base offset `base`.
pub fn kafka_indexes(log: &[u8], base: i64, index_interval_bytes: u32) -> (Vec<u8>, Vec<u8>) {
    let all = batches(log);
    let (mut index, mut timeindex) = (Vec::new(), Vec::new());
    let (mut max_ts, mut shallow) = (-1i64, base);
    let mut last_time_entry = -1i64;
    let mut since = 0u64;
    let mut time_entry = |timeindex: &mut Vec<u8>, ts: i64, offset: i64| {
        if ts > last_time_entry {
            timeindex.extend_from_slice(&ts.to_be_bytes());
            timeindex.extend_from_slice(&((offset - base) as i32).to_be_bytes());
            last_time_entry = ts;
        }
    };
    for batch in &all {
        if batch.max_timestamp() > max_ts {
            (max_ts, shallow) = (batch.max_timestamp(), batch.last_offset());
        }
        if since > u64::from(index_interval_bytes) {
            index.extend_from_slice(&((batch.last_offset() - base) as i32).to_be_bytes());
            index.extend_from_slice(&(batch.position() as i32).to_be_bytes());
            time_entry(&mut timeindex, max_ts, shallow);
            since = 0;
        }
        since += batch.size_in_bytes() as u64;
    }
    time_entry(&mut timeindex, max_ts, shallow);
    (index, timeindex)
}
