//! The crate's one error enum, and the evidence a corruption carries.
//!
//! Bytes from disk or the network are never trusted: every check that can fail on outside input
//! returns one of these, naming the position and the check that failed.

use crate::format::Compression;

/// Errors of the log layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A batch (v2) or legacy message failed a structural or checksum check.
    #[error("corrupt batch at position {position}: {reason}")]
    CorruptBatch { position: u64, reason: Corruption },
    /// A batch could not be built from the given input (the caller's mistake, not corruption).
    #[error("invalid batch input: {0}")]
    InvalidInput(&'static str),
    /// An I/O failure while reading or writing a file.
    #[error("{path}: {source}")]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An append or read refused for a reason Kafka names with an error code.
    #[error("{error}: {message}")]
    Rejected { error: KafkaError, message: String },
    /// An index file that fails its sanity check (it is rebuilt from the `.log`, never trusted).
    #[error("corrupt index {path}: {reason}")]
    CorruptIndex {
        path: std::path::PathBuf,
        reason: String,
    },
    /// A checkpoint or metadata file that does not parse.
    #[error("corrupt file {path} (line {line}): {reason}")]
    CorruptFile {
        path: std::path::PathBuf,
        line: usize,
        reason: String,
    },
    /// Another process (or another writer in this one) holds the log directory's `.lock`: one writer per
    /// log directory, as Kafka's `LogManager` enforces. Readers open without it.
    #[error(
        "Failed to acquire lock on file .lock in {dir}: {} is using this directory \
         (Kafka, or a klog writer: append, recover, mirror run, cluster admin); readers (dump, read, verify, \
         producers, recover --dry-run) need no lock", holder.map_or("another process".to_string(), |p| format!("another process (pid {p})"))
    )]
    LogDirLocked {
        dir: std::path::PathBuf,
        /// The holder's pid, when its lock file names one.
        holder: Option<u32>,
    },
    /// A second writable open of a partition directory in this process.
    #[error("{dir} is already open for writing in this process: one writer per partition")]
    PartitionInUse { dir: std::path::PathBuf },
    /// A change asked of a log opened read-only (a reader's open never writes, recovers or locks).
    #[error("{dir}: {operation} refused: the log was opened read-only")]
    ReadOnly {
        dir: std::path::PathBuf,
        operation: &'static str,
    },
    /// A directory that is not named `<topic>-<partition>` under Kafka's rules (`Topic.validate`,
    /// `LocalLog.parseTopicPartitionName`): refused before anything is written in it or about it.
    #[error("{path}: not a partition directory <topic>-<partition>: {reason}")]
    InvalidPartitionDir {
        path: std::path::PathBuf,
        reason: String,
    },
    /// An invalid configuration value, named by its Kafka key.
    #[error("invalid value {value:?} for configuration {key}: {reason}")]
    Config {
        key: &'static str,
        value: String,
        reason: &'static str,
    },
    /// A record of the KRaft metadata log (`__cluster_metadata`) or of a KRaft snapshot that does not decode.
    #[error("{path}: metadata record at offset {offset}: {reason}")]
    CorruptMetadataRecord {
        path: std::path::PathBuf,
        offset: i64,
        reason: MetadataCorruption,
    },
}

/// Kafka's error names for refused appends and reads (`Errors.java`), as `klog append` prints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KafkaError {
    CorruptMessage,
    InvalidRecord,
    MessageTooLarge,
    RecordListTooLarge,
    InvalidTimestamp,
    OffsetOutOfRange,
    UnsupportedForMessageFormat,
    KafkaStorageError,
    /// A follower append below the log end offset (Kafka's `UnexpectedAppendOffsetException`).
    UnexpectedAppendOffset,
    /// Follower batches whose offsets do not increase (Kafka's `OffsetsOutOfOrderException`).
    OffsetsOutOfOrder,
    /// A leader append with an epoch older than the log's latest.
    FencedLeaderEpoch,
    InvalidProducerEpoch,
    OutOfOrderSequenceNumber,
    InvalidTxnState,
    TransactionCoordinatorFenced,
    /// A leader append to a mirror partition that is not (yet) writable (KIP-1279, code 134).
    ReadOnlyTopic,
}

impl KafkaError {
    pub fn name(self) -> &'static str {
        match self {
            KafkaError::CorruptMessage => "CORRUPT_MESSAGE",
            KafkaError::InvalidRecord => "INVALID_RECORD",
            KafkaError::MessageTooLarge => "MESSAGE_TOO_LARGE",
            KafkaError::RecordListTooLarge => "RECORD_LIST_TOO_LARGE",
            KafkaError::InvalidTimestamp => "INVALID_TIMESTAMP",
            KafkaError::OffsetOutOfRange => "OFFSET_OUT_OF_RANGE",
            KafkaError::UnsupportedForMessageFormat => "UNSUPPORTED_FOR_MESSAGE_FORMAT",
            KafkaError::KafkaStorageError => "KAFKA_STORAGE_ERROR",
            KafkaError::UnexpectedAppendOffset => "UNEXPECTED_APPEND_OFFSET",
            KafkaError::OffsetsOutOfOrder => "OFFSETS_OUT_OF_ORDER",
            KafkaError::FencedLeaderEpoch => "FENCED_LEADER_EPOCH",
            KafkaError::InvalidProducerEpoch => "INVALID_PRODUCER_EPOCH",
            KafkaError::OutOfOrderSequenceNumber => "OUT_OF_ORDER_SEQUENCE_NUMBER",
            KafkaError::InvalidTxnState => "INVALID_TXN_STATE",
            KafkaError::TransactionCoordinatorFenced => "TRANSACTION_COORDINATOR_FENCED",
            KafkaError::ReadOnlyTopic => "READ_ONLY_TOPIC",
        }
    }
}

impl KafkaError {
    /// The log's view of a producer-state refusal.
    pub fn from_producer_state(e: &klog_psm::Error) -> Self {
        match e.kafka_error_name() {
            "INVALID_PRODUCER_EPOCH" => KafkaError::InvalidProducerEpoch,
            "OUT_OF_ORDER_SEQUENCE_NUMBER" => KafkaError::OutOfOrderSequenceNumber,
            "INVALID_TXN_STATE" => KafkaError::InvalidTxnState,
            "TRANSACTION_COORDINATOR_FENCED" => KafkaError::TransactionCoordinatorFenced,
            _ => KafkaError::InvalidRecord,
        }
    }
}

impl std::fmt::Display for KafkaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Which check a batch failed. Each variant carries what was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Corruption {
    #[error("premature end of data: need {needed} bytes, have {available}")]
    Truncated { needed: u64, available: u64 },
    #[error("batch length {batch_length} is smaller than the minimum {minimum}")]
    BatchLengthTooSmall { batch_length: i32, minimum: i32 },
    #[error("unsupported magic {magic}")]
    BadMagic { magic: i8 },
    #[error("crc mismatch (stored crc = {stored}, computed crc = {computed})")]
    Crc { stored: u32, computed: u32 },
    #[error("negative record count {count}")]
    NegativeRecordCount { count: i32 },
    #[error("unknown compression type id {id}")]
    UnknownCompression { id: u8 },
    #[error("{codec} stream is invalid: {detail}")]
    Decompression { codec: Compression, detail: String },
    #[error("{codec} stream inflates past the limit of {limit} bytes")]
    DecompressedTooLarge { codec: Compression, limit: usize },
    #[error("record {index}: {reason}")]
    Record {
        index: u32,
        reason: RecordCorruption,
    },
    #[error("declared {declared} records but found {found} (premature EOF)")]
    MissingRecords { declared: i32, found: u32 },
    #[error("{bytes} bytes remain after the last declared record")]
    TrailingBytes { bytes: u64 },
    #[error("batch offsets {first}..={last} do not fit the segment based at {segment_base}")]
    OffsetOverflow {
        segment_base: i64,
        first: i64,
        last: i64,
    },
    #[error("control batch has no control record")]
    EmptyControlBatch,
    #[error("control record key: {0}")]
    ControlKey(&'static str),
    #[error("control record value: {0}")]
    ControlValue(&'static str),
}

/// Which check a single record failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordCorruption {
    #[error("varint of {field} is too long")]
    VarintTooLong { field: &'static str },
    #[error("{field} runs past the end of the data")]
    Truncated { field: &'static str },
    #[error("record length {length} is invalid ({available} bytes available)")]
    BadLength { length: i64, available: u64 },
    #[error("{field} length {length} is invalid ({available} bytes available)")]
    BadFieldLength {
        field: &'static str,
        length: i32,
        available: u64,
    },
    #[error("header count {count} is invalid ({available} bytes available)")]
    BadHeaderCount { count: i32, available: u64 },
    #[error("record body is {actual} bytes but its length field says {declared}")]
    SizeMismatch { declared: u64, actual: u64 },
}

/// Which check a KRaft metadata record (or a KRaft control record's value) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MetadataCorruption {
    #[error("a metadata record needs a value, and this one is null")]
    NullValue,
    #[error("unknown frame version {0} (only frame version 1 is supported)")]
    FrameVersion(u32),
    #[error("{what} {value} is too large")]
    HeaderTooLarge { what: &'static str, value: u32 },
    #[error("unknown metadata record type {0}")]
    UnknownType(i16),
    #[error("can't read version {version} of {record}")]
    UnsupportedVersion { record: &'static str, version: i16 },
    #[error("{record}: field {field}: {reason}")]
    Field {
        record: &'static str,
        field: &'static str,
        reason: RecordCorruption,
    },
    #[error("{record}: non-nullable field {field} was serialized as null")]
    NullField {
        record: &'static str,
        field: &'static str,
    },
    #[error("{record}: string field {field} had invalid length {length}")]
    StringLength {
        record: &'static str,
        field: &'static str,
        length: u32,
    },
    #[error("{record}: field {field}: a collection of {length} elements, but only {remaining} bytes remain")]
    ArrayLength {
        record: &'static str,
        field: &'static str,
        length: u32,
        remaining: usize,
    },
    #[error("{record}: tagged field {tag} is {declared} bytes but its value took {used}")]
    TaggedFieldSize {
        record: &'static str,
        tag: u32,
        declared: u32,
        used: usize,
    },
    #[error("found {bytes} byte(s) of garbage after {record}")]
    Garbage { record: &'static str, bytes: usize },
}

impl Error {
    pub(crate) fn corrupt(position: u64, reason: Corruption) -> Self {
        Error::CorruptBatch { position, reason }
    }

    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_owned(),
            source,
        }
    }

    pub(crate) fn rejected(error: KafkaError, message: impl Into<String>) -> Self {
        Error::Rejected {
            error,
            message: message.into(),
        }
    }

    /// The Kafka error name this error maps to (I/O failures are `KAFKA_STORAGE_ERROR`).
    pub fn kafka_error(&self) -> KafkaError {
        match self {
            Error::Rejected { error, .. } => *error,
            Error::CorruptBatch { .. } => KafkaError::CorruptMessage,
            Error::InvalidInput(_) => KafkaError::InvalidRecord,
            _ => KafkaError::KafkaStorageError,
        }
    }
}

/// Adds the path to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn at(self, path: &std::path::Path) -> Result<T, Error>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, path: &std::path::Path) -> Result<T, Error> {
        self.map_err(|e| Error::io(path, e))
    }
}
