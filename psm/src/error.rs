//! The crate's one error enum. Refusals carry what Kafka's exception message carries (without the
//! topic-partition, which this crate does not know) and map to Kafka's error names.

use crate::batch::TransactionVersion;
/// Why an append was refused, or a snapshot could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `InvalidProducerEpochException`: the batch or marker has an older epoch than the producer's, or
    /// a coordinator's transaction version 2 marker does not bump it.
    #[error(
        "Epoch of producer {producer_id} at offset {offset} is {producer_epoch}, which is {} the last \
         seen epoch {current_epoch}{}",
        if transaction_version.marker_bumps_epoch() { "<=" } else { "smaller than" },
        if transaction_version.marker_bumps_epoch() { format!(" (TV{})", transaction_version.0) } else { String::new() }
    )]
    InvalidProducerEpoch {
        /// The producer.
        producer_id: i64,
        /// The offset of the refused batch or marker.
        offset: i64,
        /// The epoch the batch or marker carries.
        producer_epoch: i16,
        /// The producer's current epoch.
        current_epoch: i16,
        /// The version the append was checked under ([`TransactionVersion::UNKNOWN`] for data).
        transaction_version: TransactionVersion,
    },
    /// `OutOfOrderSequenceException`: a known producer's new epoch must start at sequence 0.
    #[error(
        "Invalid sequence number for new epoch of producer {producer_id} at offset {offset}: \
         {producer_epoch} (request epoch), {sequence} (seq. number), {current_epoch} (current producer epoch)"
    )]
    InvalidSequenceForNewEpoch {
        /// The producer.
        producer_id: i64,
        /// The offset of the refused batch.
        offset: i64,
        /// The batch's (new) epoch.
        producer_epoch: i16,
        /// The batch's first sequence (not 0).
        sequence: i32,
        /// The producer's current epoch.
        current_epoch: i16,
    },
    /// `OutOfOrderSequenceException`: the first sequence does not follow the last one.
    #[error(
        "Out of order sequence number for producer {producer_id} at offset {offset}: {sequence} \
         (incoming seq. number), {last_sequence} (current end sequence number)"
    )]
    OutOfOrderSequence {
        /// The producer.
        producer_id: i64,
        /// The offset of the refused batch.
        offset: i64,
        /// The batch's first sequence.
        sequence: i32,
        /// The producer's last sequence.
        last_sequence: i32,
    },
    /// `InvalidTxnStateException`: a non-transactional batch while the producer's transaction is open.
    #[error("Expected transactional write from producer {producer_id} at offset {offset}")]
    InvalidTxnState {
        /// The producer.
        producer_id: i64,
        /// The offset of the refused batch.
        offset: i64,
    },
    /// `TransactionCoordinatorFencedException`: a marker from an older transaction coordinator.
    #[error(
        "Invalid coordinator epoch for producerId {producer_id} at offset {offset}: {coordinator_epoch} \
         (zombie), {current_coordinator_epoch} (current)"
    )]
    TransactionCoordinatorFenced {
        /// The producer.
        producer_id: i64,
        /// The offset of the refused marker.
        offset: i64,
        /// The marker's coordinator epoch.
        coordinator_epoch: i32,
        /// The coordinator epoch the producer has seen.
        current_coordinator_epoch: i32,
    },
    /// A control batch with a producer id that is not a COMMIT or ABORT marker. Kafka parses it as an
    /// `EndTransactionMarker` and fails with `IllegalArgumentException` (UNKNOWN_SERVER_ERROR).
    #[error(
        "Invalid record type for a transaction marker: control batch of producer {producer_id} at \
         offset {offset} is neither COMMIT nor ABORT"
    )]
    InvalidTransactionMarker {
        /// The producer.
        producer_id: i64,
        /// The offset of the control batch.
        offset: i64,
    },
    /// `CorruptSnapshotException`: a `.snapshot` file that cannot be trusted.
    #[error("{0}")]
    CorruptSnapshot(SnapshotCorruption),
}

/// Which check a snapshot failed, with what was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotCorruption {
    /// The snapshot file version is not one Kafka writes (1).
    #[error("Snapshot contained an unknown file version {version}")]
    UnknownVersion {
        /// The version found.
        version: i16,
    },
    /// The stored CRC-32C does not match the contents.
    #[error("Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored}. Computed crc: {computed}")]
    Crc {
        /// The CRC in the file.
        stored: u32,
        /// The CRC of the contents.
        computed: u32,
    },
    #[error(
        "Snapshot failed schema validation: reading field '{field}' needs {needed} bytes, the file has \
         {available}"
    )]
    /// The file ends before a field.
    Truncated {
        /// The field being read.
        field: &'static str,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left in the file.
        available: usize,
    },
    /// An array length is negative.
    #[error("Snapshot failed schema validation: Array size {count} cannot be negative")]
    NegativeCount {
        /// The count found.
        count: i32,
    },
}

impl Error {
    /// Kafka's name for this error (`Errors.java`), as a produce response would carry it.
    pub fn kafka_error_name(&self) -> &'static str {
        match self {
            Error::InvalidProducerEpoch { .. } => "INVALID_PRODUCER_EPOCH",
            Error::InvalidSequenceForNewEpoch { .. } | Error::OutOfOrderSequence { .. } => {
                "OUT_OF_ORDER_SEQUENCE_NUMBER"
            }
            Error::InvalidTxnState { .. } => "INVALID_TXN_STATE",
            Error::TransactionCoordinatorFenced { .. } => "TRANSACTION_COORDINATOR_FENCED",
            Error::InvalidTransactionMarker { .. } => "UNKNOWN_SERVER_ERROR",
            Error::CorruptSnapshot(_) => "CORRUPT_SNAPSHOT",
        }
    }

    /// Kafka's numeric error code, where the protocol has one (a corrupt snapshot never reaches a client).
    pub fn kafka_error_code(&self) -> Option<i16> {
        match self {
            Error::OutOfOrderSequence { .. } | Error::InvalidSequenceForNewEpoch { .. } => Some(45),
            Error::InvalidProducerEpoch { .. } => Some(47),
            Error::InvalidTxnState { .. } => Some(48),
            Error::TransactionCoordinatorFenced { .. } => Some(52),
            Error::InvalidTransactionMarker { .. } => Some(-1),
            Error::CorruptSnapshot(_) => None,
        }
    }
}
