//! Checks a set of batches before anything is written (`LogValidator.java`, `analyzeAndValidateRecords`):
//! either every batch passes and the append goes ahead, or nothing is written.
//!
//! Leader appends (client and coordinator origins) have every record walked in place, as Kafka's
//! `LogValidator` iterates them: record count, offset deltas, timestamps, key/value/header lengths, no
//! trailing bytes. A compressed batch is inflated into a buffer that stops at [`inflation_limit`], so a
//! small batch that inflates without bound (a "bomb") is refused, never held. Follower and mirror appends
//! are not walked: like Kafka's follower, klog keeps the leader's bytes (a batch it cannot iterate later
//! reads back with an error naming the batch and the check). They are not held to `max.message.bytes`
//! either (Kafka's `ignoreRecordSize`), but to everything else Kafka's `analyzeAndValidateRecords` and
//! `append` check for them: the CRC, offsets that increase, and a set that fits `segment.bytes`.

use crate::config::LogConfig;
use crate::format::{
    walk_records, AnyBatch, Batches, Compression, RecordBatch, RecordsWalk, Tail, TimestampType,
    DEFAULT_MAX_DECOMPRESSED_BYTES, NO_TIMESTAMP,
};
use crate::{Corruption, Error, KafkaError};

/// How far a leader lets one compressed batch inflate, as a multiple of `max.message.bytes` (Kafka has
/// no such limit; it streams the records). 64x admits the ratios real data reaches with any codec
/// (text and JSON: 5-20x) with room to spare, and bounds the memory of one append: 64 MiB at the
/// default `max.message.bytes`, never more than the reader's own cap, so whatever a leader admits klog
/// can read back.
pub const INFLATION_FACTOR: usize = 64;

/// The most bytes a leader inflates one compressed batch to: [`INFLATION_FACTOR`] x `max.message.bytes`,
/// at most [`DEFAULT_MAX_DECOMPRESSED_BYTES`].
pub fn inflation_limit(config: &LogConfig) -> usize {
    (config.max_message_bytes as usize)
        .saturating_mul(INFLATION_FACTOR)
        .min(DEFAULT_MAX_DECOMPRESSED_BYTES)
}

/// Who is appending, which decides the rules (Kafka's `AppendOrigin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A producer: one batch, base offset 0, no control batches.
    Client,
    /// The coordinator or the log itself: control batches allowed (markers, MIRROR_PID_RESET).
    Coordinator,
    /// A follower or a mirror: offsets, epochs and bytes are kept as they are, whatever their size
    /// against `max.message.bytes`.
    Replication,
}

/// What the validation learned about the batches.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ValidatedBatches {
    /// (position in the input, size, base offset, last offset, max timestamp) per batch.
    pub batches: Vec<BatchSummary>,
    /// The bytes of every batch.
    pub total_bytes: usize,
}

/// One validated batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSummary {
    /// Its position in the input.
    pub position: usize,
    /// Its size in bytes.
    pub size: usize,
    /// Its base offset (assigned, for a leader).
    pub base_offset: i64,
    /// Its last offset.
    pub last_offset: i64,
    /// Its max timestamp.
    pub max_timestamp: i64,
    /// Its record count.
    pub records_count: i32,
    /// Its partition leader epoch.
    pub partition_leader_epoch: i32,
    /// Whether it is a control batch.
    pub is_control: bool,
    /// Its magic.
    pub magic: i8,
}

fn reject(error: KafkaError, message: String) -> Error {
    Error::Rejected { error, message }
}

/// Validates `bytes` (concatenated batches) for an append with the given origin.
pub fn validate(
    bytes: &[u8],
    origin: AppendOrigin,
    config: &LogConfig,
    now_ms: i64,
) -> Result<ValidatedBatches, Error> {
    let mut batches = Vec::new();
    // Reused by every compressed batch of the set; an uncompressed set never allocates it.
    let mut scratch = Vec::new();
    // Each batch's CRC is checked here, in one call over the whole batch, before its records are
    // walked: fused with the walk in one pass (the CRC updated every 1-16 KiB walked) the two were
    // 2-39% slower (BENCHMARKS.md, "Append").
    let mut it = Batches::new(bytes);
    for batch in it.by_ref() {
        let batch = batch.map_err(|e| reject(KafkaError::CorruptMessage, e.to_string()))?;
        let summary = summarize(&batch);
        // `appendAsFollower` passes `ignoreRecordSize`: the leader already accepted the batch, under its
        // own limit (a follower's may be lower, or lowered since), so only a leader checks it.
        if origin != AppendOrigin::Replication && summary.size > config.max_message_bytes as usize {
            return Err(reject(
                KafkaError::MessageTooLarge,
                format!(
                    "batch at position {} is {} bytes, larger than max.message.bytes {}",
                    summary.position, summary.size, config.max_message_bytes
                ),
            ));
        }
        if summary.last_offset < summary.base_offset {
            return Err(reject(
                KafkaError::InvalidRecord,
                format!(
                    "batch at position {}: last offset {} is below its base offset {}",
                    summary.position, summary.last_offset, summary.base_offset
                ),
            ));
        }
        let mut summary = summary;
        if let Some(records_max) =
            check_origin(&batch, &summary, origin, config, now_ms, &mut scratch)?
        {
            // Kafka's `setMaxTimestamp(CREATE_TIME, maxBatchTimestamp)`: the leader stamps it.
            summary.max_timestamp = records_max;
        }
        if let Some(prev) = batches.last() {
            let prev: &BatchSummary = prev;
            if origin == AppendOrigin::Replication && summary.base_offset <= prev.last_offset {
                return Err(reject(
                    KafkaError::OffsetsOutOfOrder,
                    format!(
                        "batch at offset {} follows offset {}",
                        summary.base_offset, prev.last_offset
                    ),
                ));
            }
        }
        batches.push(summary);
    }
    match it.tail() {
        Some(Tail::Clean) => {}
        Some(t) => {
            return Err(reject(
                KafkaError::CorruptMessage,
                format!("incomplete data after the last batch: {t}"),
            ))
        }
        None => unreachable!("the iterator ran to its end"),
    }
    if batches.is_empty() {
        return Err(reject(
            KafkaError::InvalidRecord,
            "no batches to append".into(),
        ));
    }
    if origin == AppendOrigin::Client && batches.len() != 1 {
        return Err(reject(
            KafkaError::InvalidRecord,
            format!("a producer sends one batch, got {}", batches.len()),
        ));
    }
    if bytes.len() > config.segment_bytes as usize {
        return Err(reject(
            KafkaError::RecordListTooLarge,
            format!(
                "{} bytes exceed segment.bytes {}",
                bytes.len(),
                config.segment_bytes
            ),
        ));
    }
    Ok(ValidatedBatches {
        batches,
        total_bytes: bytes.len(),
    })
}

fn summarize(batch: &AnyBatch<'_>) -> BatchSummary {
    let (records_count, ple, is_control, magic) = match batch {
        AnyBatch::V2(b) => (
            b.records_count(),
            b.partition_leader_epoch(),
            b.is_control(),
            2,
        ),
        AnyBatch::Legacy(e) => (1, -1, false, e.magic),
    };
    BatchSummary {
        position: batch.position() as usize,
        size: batch.size_in_bytes(),
        base_offset: batch.base_offset(),
        last_offset: batch.last_offset(),
        max_timestamp: batch.max_timestamp(),
        records_count,
        partition_leader_epoch: ple,
        is_control,
        magic,
    }
}

fn check_origin(
    batch: &AnyBatch<'_>,
    summary: &BatchSummary,
    origin: AppendOrigin,
    config: &LogConfig,
    now_ms: i64,
    scratch: &mut Vec<u8>,
) -> Result<Option<i64>, Error> {
    if origin == AppendOrigin::Replication {
        return Ok(None);
    }
    let AnyBatch::V2(b) = batch else {
        return Err(reject(
            KafkaError::UnsupportedForMessageFormat,
            "a leader appends only record batch v2 (magic 2)".into(),
        ));
    };
    let at = summary.position;
    if origin == AppendOrigin::Client {
        check_client_batch(b, at)?;
    }
    check_offsets_match_count(b, at)?;
    let walk = walk_batch(b, at, config, scratch)?;
    if let Some((index, delta)) = walk.offset_delta_gap {
        // Kafka rebuilds such a batch; klog assigns offsets in place, so the deltas must be 0..n-1.
        return Err(reject(
            KafkaError::InvalidRecord,
            format!("batch at {at}: record {index} has offset delta {delta}, expected {index}"),
        ));
    }
    check_timestamps(b, &walk, at, config, now_ms)?;
    Ok(records_max_timestamp(b, &walk, config))
}

/// The max timestamp Kafka stamps on a CreateTime batch: the largest record timestamp, -1 if none is
/// larger (`LogValidator.assignOffsetsNonCompressed`). `None` where the header's stays (LogAppendTime).
fn records_max_timestamp(
    b: &RecordBatch<'_>,
    walk: &RecordsWalk,
    config: &LogConfig,
) -> Option<i64> {
    let create_time = config.message_timestamp_type == TimestampType::CreateTime
        && b.timestamp_type() == TimestampType::CreateTime;
    create_time.then(|| {
        walk.latest
            .map_or(NO_TIMESTAMP, |(_, t)| t.max(NO_TIMESTAMP))
    })
}

/// `LogValidator.validateBatch`, client origin.
fn check_client_batch(b: &RecordBatch<'_>, at: usize) -> Result<(), Error> {
    if b.base_offset() != 0 {
        return Err(reject(
            KafkaError::InvalidRecord,
            format!("batch at {at}: a producer batch has base offset 0"),
        ));
    }
    if b.is_control() {
        return Err(reject(
            KafkaError::InvalidRecord,
            format!("batch at {at}: producers cannot write control batches"),
        ));
    }
    if b.producer_id() >= 0 && b.base_sequence() < 0 {
        return Err(reject(
            KafkaError::InvalidRecord,
            format!("batch at {at}: a producer id needs a base sequence"),
        ));
    }
    if b.timestamp_type() == TimestampType::LogAppendTime {
        return Err(reject(
            KafkaError::InvalidTimestamp,
            format!("batch at {at}: producers cannot claim LogAppendTime"),
        ));
    }
    Ok(())
}

/// `lastOffset - baseOffset + 1 == count > 0`: the offsets a leader assigns from the header must be the
/// records the batch holds.
fn check_offsets_match_count(b: &RecordBatch<'_>, at: usize) -> Result<(), Error> {
    if b.records_count() <= 0 || b.last_offset_delta() as i64 + 1 != b.records_count() as i64 {
        return Err(reject(
            KafkaError::InvalidRecord,
            format!(
                "batch at {at}: last offset delta {} does not match {} records",
                b.last_offset_delta(),
                b.records_count()
            ),
        ));
    }
    Ok(())
}

/// Every record walked in place (inflated first, within [`inflation_limit`], if compressed).
fn walk_batch(
    b: &RecordBatch<'_>,
    at: usize,
    config: &LogConfig,
    scratch: &mut Vec<u8>,
) -> Result<RecordsWalk, Error> {
    let codec = b
        .compression()
        .map_err(|e| reject(KafkaError::CorruptMessage, e.to_string()))?;
    let data = match codec {
        Compression::None => b.records_payload(),
        codec => {
            let limit = inflation_limit(config);
            codec
                .decompress(b.records_payload(), scratch, limit)
                .map_err(|reason| inflate_error(reason, at))?;
            scratch.as_slice()
        }
    };
    // Kafka's `DefaultRecord.readFrom` and the batch iterator throw `InvalidRecordException`.
    walk_records(data, b.records_count(), b.base_timestamp()).map_err(|reason| {
        reject(
            KafkaError::InvalidRecord,
            format!("batch at {at}: {reason}"),
        )
    })
}

fn inflate_error(reason: Corruption, at: usize) -> Error {
    let error = match reason {
        // What Kafka answers for a batch bigger than it accepts (`RecordTooLargeException`).
        Corruption::DecompressedTooLarge { .. } => KafkaError::MessageTooLarge,
        _ => KafkaError::CorruptMessage,
    };
    reject(
        error,
        format!(
            "batch at {at}: {reason} ({INFLATION_FACTOR} x max.message.bytes, at most {DEFAULT_MAX_DECOMPRESSED_BYTES})"
        ),
    )
}

/// `LogValidator.validateTimestamp`, per record: with CreateTime every timestamp other than -1 within
/// `[now - before.max.ms, now + after.max.ms]`; with LogAppendTime a batch claiming it is refused.
fn check_timestamps(
    b: &RecordBatch<'_>,
    walk: &RecordsWalk,
    at: usize,
    config: &LogConfig,
    now_ms: i64,
) -> Result<(), Error> {
    let claims_append_time = b.timestamp_type() == TimestampType::LogAppendTime;
    if config.message_timestamp_type == TimestampType::LogAppendTime {
        if claims_append_time {
            return Err(reject(
                KafkaError::InvalidTimestamp,
                format!("batch at {at}: only the broker sets LogAppendTime"),
            ));
        }
        return Ok(());
    }
    // A LogAppendTime batch's records all carry its max timestamp.
    let (earliest, latest) = if claims_append_time {
        let t = Some((0, b.max_timestamp())).filter(|(_, t)| *t != NO_TIMESTAMP);
        (t, t)
    } else {
        (walk.earliest, walk.latest)
    };
    let before = config.message_timestamp_before_max_ms;
    let after = config.message_timestamp_after_max_ms;
    let out_of_range = [
        earliest.filter(|(_, ts)| now_ms.saturating_sub(*ts) > before),
        latest.filter(|(_, ts)| ts.saturating_sub(now_ms) > after),
    ];
    if let Some((index, ts)) = out_of_range.into_iter().flatten().next() {
        return Err(reject(
            KafkaError::InvalidTimestamp,
            format!(
                "batch at {at}: record {index} timestamp {ts} is out of range, it should be within [{}, {}]",
                now_ms.saturating_sub(before),
                now_ms.saturating_add(after)
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{crc32c, BatchBuilder, CRC_START, RECORD_BATCH_OVERHEAD};
    use proptest::prelude::*;

    const NOW: i64 = 1_796_000_000_000;

    /// A producer batch of `sizes` values, timestamps `NOW` on, its record bytes then changed by
    /// `flips` (index into the records, new byte); the CRC fixed up after them when `fix_crc`.
    fn mangled(sizes: &[usize], flips: &[(usize, u8)], fix_crc: bool) -> Vec<u8> {
        let mut b = BatchBuilder::new(Compression::None);
        for (i, &n) in sizes.iter().enumerate() {
            let key = format!("k{i}");
            b.append(
                NOW + i as i64,
                Some(key.as_bytes()),
                Some(&vec![3u8; n]),
                &[],
            )
            .expect("append");
        }
        let mut bytes = b.build().expect("build");
        let records = bytes.len() - RECORD_BATCH_OVERHEAD;
        for &(at, v) in flips {
            bytes[RECORD_BATCH_OVERHEAD + at % records] = v;
        }
        if fix_crc {
            let crc = crc32c(&bytes[CRC_START..]);
            bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        }
        bytes
    }

    proptest! {
        /// The leader refuses and accepts exactly what the CRC check and the record walk do: a batch
        /// whose CRC is wrong is CORRUPT_MESSAGE with the message of the CRC check of `Batches`,
        /// whatever its records hold; with a right CRC, it is accepted exactly when `walk_records`
        /// accepts its records (offset deltas their indexes, timestamps in range), and a walk that
        /// fails is INVALID_RECORD naming the walk's reason. Any reordering or fusion of the two
        /// passes must keep this.
        #[test]
        fn the_leader_refuses_exactly_what_the_separate_crc_and_walk_refuse(
            sizes in proptest::collection::vec(0usize..2500, 1..40),
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..3),
            fix_crc in any::<bool>(),
        ) {
            let bytes = mangled(&sizes, &flips, fix_crc);
            let config = LogConfig::default();
            let got = validate(&bytes, AppendOrigin::Client, &config, NOW);
            let (batch, _) = RecordBatch::parse_unchecked_crc(&bytes, 0).expect("structure");
            let crc_check = Batches::new(&bytes).next().expect("one batch");
            if let Err(crc) = crc_check {
                let e = got.expect_err("a wrong CRC is refused");
                prop_assert_eq!(e.kafka_error(), KafkaError::CorruptMessage);
                prop_assert_eq!(e.to_string(), reject(KafkaError::CorruptMessage, crc.to_string()).to_string());
                return Ok(());
            }
            let walk = walk_records(batch.records_payload(), batch.records_count(), batch.base_timestamp());
            match (walk, got) {
                (Err(reason), Err(e)) => {
                    prop_assert_eq!(e.kafka_error(), KafkaError::InvalidRecord);
                    prop_assert!(e.to_string().contains(&reason.to_string()), "{} / {}", e, reason);
                }
                (Err(reason), Ok(_)) => prop_assert!(false, "accepted, the walk refused: {reason}"),
                (Ok(walk), got) => {
                    let after = NOW + config.message_timestamp_after_max_ms;
                    let fine = walk.offset_delta_gap.is_none()
                        && walk.latest.is_none_or(|(_, t)| t <= after);
                    prop_assert_eq!(got.is_ok(), fine, "{:?} {:?}", walk, got);
                }
            }
        }
    }
}
