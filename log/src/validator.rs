//! Checks a set of batches before anything is written (`LogValidator.java`, `analyzeAndValidateRecords`):
//! either every batch passes and the append goes ahead, or nothing is written.

use crate::config::LogConfig;
use crate::format::{AnyBatch, Batches, Tail, TimestampType};
use crate::{Error, KafkaError};

/// Who is appending, which decides the rules (Kafka's `AppendOrigin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A producer: one batch, base offset 0, no control batches.
    Client,
    /// The coordinator or the log itself: control batches allowed (markers, MIRROR_PID_RESET).
    Coordinator,
    /// A follower or a mirror: offsets, epochs and bytes are kept as they are.
    Replication,
}

/// What the validation learned about the batches.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ValidatedBatches {
    /// (position in the input, size, base offset, last offset, max timestamp) per batch.
    pub batches: Vec<BatchSummary>,
    pub total_bytes: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSummary {
    pub position: usize,
    pub size: usize,
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub records_count: i32,
    pub partition_leader_epoch: i32,
    pub is_control: bool,
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
    let mut it = Batches::new(bytes);
    for batch in it.by_ref() {
        let batch = batch.map_err(|e| reject(KafkaError::CorruptMessage, e.to_string()))?;
        let summary = summarize(&batch);
        if summary.size > config.max_message_bytes as usize {
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
        check_origin(&batch, &summary, origin, config, now_ms)?;
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
                format!("incomplete data after the last batch: {t:?}"),
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
) -> Result<(), Error> {
    if origin == AppendOrigin::Replication {
        return Ok(());
    }
    let AnyBatch::V2(b) = batch else {
        return Err(reject(
            KafkaError::UnsupportedForMessageFormat,
            "a leader appends only record batch v2 (magic 2)".into(),
        ));
    };
    let at = summary.position;
    if origin == AppendOrigin::Client {
        if b.base_offset() != 0 {
            return Err(reject(
                KafkaError::InvalidRecord,
                format!("batch at {at}: a producer batch has base offset 0"),
            ));
        }
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
    }
    b.compression()
        .map_err(|e| reject(KafkaError::CorruptMessage, e.to_string()))?;
    if config.message_timestamp_type == TimestampType::CreateTime && b.max_timestamp() >= 0 {
        let ts = b.max_timestamp();
        if now_ms.saturating_sub(ts) > config.message_timestamp_before_max_ms
            || ts.saturating_sub(now_ms) > config.message_timestamp_after_max_ms
        {
            return Err(reject(
                KafkaError::InvalidTimestamp,
                format!(
                    "batch at {at}: timestamp {ts} is out of the allowed range around {now_ms}"
                ),
            ));
        }
    }
    Ok(())
}
