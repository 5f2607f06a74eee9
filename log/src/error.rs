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
    CorruptBatch {
        /// The batch's byte position in its file or buffer.
        position: u64,
        /// The check that failed.
        reason: Corruption,
    },
    /// A batch of a segment file that failed a check, with the file named (the cleaner's reads of sealed
    /// segments, whose errors reach a user who must find the file).
    #[error("{path}: corrupt batch at position {position}: {reason}")]
    CorruptSegmentBatch {
        /// The segment's `.log` file.
        path: std::path::PathBuf,
        /// The batch's byte position in the file.
        position: u64,
        /// The check that failed.
        reason: Corruption,
    },
    /// A batch could not be built from the given input (the caller's mistake, not corruption).
    #[error("invalid batch input: {0}")]
    InvalidInput(&'static str),
    /// An I/O failure while reading or writing a file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// An append or read refused for a reason Kafka names with an error code.
    #[error("{error}: {message}")]
    Rejected {
        /// Kafka's name for the refusal.
        error: KafkaError,
        /// What was refused and why.
        message: String,
    },
    /// An index file that fails its sanity check (it is rebuilt from the `.log`, never trusted).
    #[error("corrupt index {path}: {reason}")]
    CorruptIndex {
        /// The index file.
        path: std::path::PathBuf,
        /// The check it failed.
        reason: String,
    },
    /// A checkpoint or metadata file that does not parse.
    #[error("corrupt file {path} (line {line}): {reason}")]
    CorruptFile {
        /// The file.
        path: std::path::PathBuf,
        /// The line that does not parse (0: the file as a whole).
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A `__consumer_offsets` or `__transaction_state` record that does not decode under Kafka's schemas.
    #[error("corrupt coordinator record: {0}")]
    CorruptCoordinatorRecord(#[from] crate::coordinator::CoordinatorCorruption),
    /// Another process (or another writer in this one) holds the log directory's `.lock`: one writer per
    /// log directory, as Kafka's `LogManager` enforces. Readers open without it.
    #[error(
        "Failed to acquire lock on file .lock in {dir}: {} is using this directory \
         (Kafka, or a klog writer: append, recover, mirror run, cluster admin); readers (dump, read, verify, \
         producers, recover --dry-run) need no lock", holder.map_or("another process".to_string(), |p| format!("another process (pid {p})"))
    )]
    LogDirLocked {
        /// The log directory.
        dir: std::path::PathBuf,
        /// The holder's pid, when its lock file names one.
        holder: Option<u32>,
    },
    /// A second writable `LogDir` of one log directory in this process: its close would put the
    /// clean-shutdown marker down while the other still appends.
    #[error(
        "{dir} is already open for writing in this process: one writable log directory per root"
    )]
    LogDirInUse {
        /// The log directory.
        dir: std::path::PathBuf,
    },
    /// A partition opened through a `LogDir` after its clean shutdown: the marker it wrote vouches for
    /// the directory as it was closed, and a write now would make it lie.
    #[error(
        "{dir} was shut down (its clean-shutdown marker is written): open the log directory again"
    )]
    LogDirShutDown {
        /// The log directory.
        dir: std::path::PathBuf,
    },
    /// A second writable open of a partition directory in this process.
    #[error("{dir} is already open for writing in this process: one writer per partition")]
    PartitionInUse {
        /// The partition directory.
        dir: std::path::PathBuf,
    },
    /// A change asked of a log opened read-only (a reader's open never writes, recovers or locks).
    #[error("{dir}: {operation} refused: the log was opened read-only")]
    ReadOnly {
        /// The partition directory.
        dir: std::path::PathBuf,
        /// The change that was asked.
        operation: &'static str,
    },
    /// A directory that is not named `<topic>-<partition>` under Kafka's rules (`Topic.validate`,
    /// `LocalLog.parseTopicPartitionName`): refused before anything is written in it or about it.
    #[error("{path}: not a partition directory <topic>-<partition>: {reason}")]
    InvalidPartitionDir {
        /// The directory.
        path: std::path::PathBuf,
        /// The rule its name breaks.
        reason: String,
    },
    /// Kafka's `InconsistentTopicIdException`: the partition directory's `partition.metadata` names
    /// another topic id than the one being assigned (another topic of that name left it).
    #[error("{path}: holds topic id {found}, not {assigned}: the directory belongs to another topic of that name (move it away, or create the topic with --topic-id {found})")]
    InconsistentTopicId {
        /// The `partition.metadata` file.
        path: std::path::PathBuf,
        /// The id the file holds.
        found: String,
        /// The id being assigned.
        assigned: String,
    },
    /// An invalid configuration value, named by its Kafka key.
    #[error("invalid value {value} for configuration {key}: {reason}")]
    Config {
        /// The configuration key.
        key: &'static str,
        /// The value given.
        value: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A batch the cleaner cannot rewrite as Kafka would (Kafka's pass fails there too): the pass stops and
    /// the log is left as it was.
    #[error("cannot clean the batch at position {position}: {reason}")]
    Uncleanable {
        /// The batch's byte position in its segment (or buffer).
        position: u64,
        /// Why.
        reason: &'static str,
    },
    /// A record of the KRaft metadata log (`__cluster_metadata`) or of a KRaft snapshot that does not decode.
    #[error("{path}: metadata record at offset {offset}: {reason}")]
    CorruptMetadataRecord {
        /// The segment or snapshot file.
        path: std::path::PathBuf,
        /// The record's offset.
        offset: i64,
        /// The check that failed.
        reason: MetadataCorruption,
    },
}

/// Kafka's error names for refused appends and reads (`Errors.java`), as `klog append` prints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KafkaError {
    /// `CORRUPT_MESSAGE`: a batch fails its CRC or structure checks.
    CorruptMessage,
    /// `INVALID_RECORD`: a record breaks a rule (for example a compacted topic record without a key).
    InvalidRecord,
    /// `MESSAGE_TOO_LARGE`: a batch is larger than `max.message.bytes`.
    MessageTooLarge,
    /// `RECORD_LIST_TOO_LARGE`: the batches do not fit a segment.
    RecordListTooLarge,
    /// `INVALID_TIMESTAMP`: a CreateTime timestamp too far from the broker clock.
    InvalidTimestamp,
    /// `OFFSET_OUT_OF_RANGE`: an offset outside the log (or one past `i64::MAX`).
    OffsetOutOfRange,
    /// `UNSUPPORTED_FOR_MESSAGE_FORMAT`: a v0/v1 batch where only v2 is accepted.
    UnsupportedForMessageFormat,
    /// `KAFKA_STORAGE_ERROR`: the log failed an I/O operation (or is closed) and refuses writes.
    KafkaStorageError,
    /// A follower append below the log end offset (Kafka's `UnexpectedAppendOffsetException`).
    UnexpectedAppendOffset,
    /// Follower batches whose offsets do not increase (Kafka's `OffsetsOutOfOrderException`).
    OffsetsOutOfOrder,
    /// A leader append with an epoch older than the log's latest.
    FencedLeaderEpoch,
    /// `INVALID_PRODUCER_EPOCH`: a batch or marker with an older epoch than the producer's.
    InvalidProducerEpoch,
    /// `OUT_OF_ORDER_SEQUENCE_NUMBER`: a sequence that does not follow the producer's last one.
    OutOfOrderSequenceNumber,
    /// `INVALID_TXN_STATE`: a non-transactional batch while the producer's transaction is open.
    InvalidTxnState,
    /// `TRANSACTION_COORDINATOR_FENCED`: a marker from an older transaction coordinator.
    TransactionCoordinatorFenced,
    /// A leader append to a mirror partition that is not (yet) writable (KIP-1279, code 134).
    ReadOnlyTopic,
}

impl KafkaError {
    /// Kafka's name, as an error code's name in `Errors.java` (`OFFSET_OUT_OF_RANGE`).
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
    /// The data ends before the batch does.
    #[error("premature end of data: need {needed} bytes, have {available}")]
    Truncated {
        /// Bytes the batch needs.
        needed: u64,
        /// Bytes left.
        available: u64,
    },
    /// `batch_length` cannot hold a v2 header.
    #[error("batch length {batch_length} is smaller than the minimum {minimum}")]
    BatchLengthTooSmall {
        /// The declared length.
        batch_length: i32,
        /// The smallest valid one.
        minimum: i32,
    },
    /// A magic byte other than 0, 1 or 2.
    #[error("unsupported magic {magic}")]
    BadMagic {
        /// The magic found.
        magic: i8,
    },
    /// The stored CRC does not match the bytes.
    #[error("crc mismatch (stored crc = {stored}, computed crc = {computed})")]
    Crc {
        /// The CRC in the header.
        stored: u32,
        /// The CRC of the bytes.
        computed: u32,
    },
    /// `records_count` is negative.
    #[error("negative record count {count}")]
    NegativeRecordCount {
        /// The count found.
        count: i32,
    },
    /// Compression bits naming no codec.
    #[error("unknown compression type id {id}")]
    UnknownCompression {
        /// The codec id found.
        id: u8,
    },
    /// A compressed stream that does not inflate.
    #[error("{codec} stream is invalid: {detail}")]
    Decompression {
        /// The codec.
        codec: Compression,
        /// The codec's error.
        detail: String,
    },
    /// A compressed stream that inflates past the cap (a decompression bomb).
    #[error("{codec} stream inflates past the limit of {limit} bytes")]
    DecompressedTooLarge {
        /// The codec.
        codec: Compression,
        /// The cap in bytes.
        limit: usize,
    },
    /// A record inside the batch is invalid.
    #[error("record {index}: {reason}")]
    Record {
        /// The record's index in the batch.
        index: u32,
        /// The check it failed.
        reason: RecordCorruption,
    },
    /// Fewer records than `records_count` declares.
    #[error("declared {declared} records but found {found} (premature EOF)")]
    MissingRecords {
        /// `records_count`.
        declared: i32,
        /// Records found.
        found: u32,
    },
    /// Bytes left after the last declared record.
    #[error("{bytes} bytes remain after the last declared record")]
    TrailingBytes {
        /// How many.
        bytes: u64,
    },
    /// A batch's offsets do not fit a 32-bit offset relative to its segment's base.
    #[error("batch offsets {first}..={last} do not fit the segment based at {segment_base}")]
    OffsetOverflow {
        /// The segment's base offset.
        segment_base: i64,
        /// The batch's base offset.
        first: i64,
        /// The batch's last offset.
        last: i64,
    },
    /// A control batch without a record.
    #[error("control batch has no control record")]
    EmptyControlBatch,
    /// A control record key that does not decode (what is wrong).
    #[error("control record key: {0}")]
    ControlKey(&'static str),
    /// A control record value that does not decode (what is wrong).
    #[error("control record value: {0}")]
    ControlValue(&'static str),
}

/// Which check a single record failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordCorruption {
    /// A varint longer than its type allows.
    #[error("varint of {field} is too long")]
    VarintTooLong {
        /// The field being read.
        field: &'static str,
    },
    /// A field runs past the end of the record.
    #[error("{field} runs past the end of the data")]
    Truncated {
        /// The field being read.
        field: &'static str,
    },
    /// A record length that is negative or longer than what is left.
    #[error("record length {length} is invalid ({available} bytes available)")]
    BadLength {
        /// The declared length.
        length: i64,
        /// Bytes left.
        available: u64,
    },
    /// A key, value or header length that is invalid.
    #[error("{field} length {length} is invalid ({available} bytes available)")]
    BadFieldLength {
        /// The field.
        field: &'static str,
        /// Its declared length.
        length: i32,
        /// Bytes left.
        available: u64,
    },
    /// A header count that is negative or cannot fit.
    #[error("header count {count} is invalid ({available} bytes available)")]
    BadHeaderCount {
        /// The declared count.
        count: i32,
        /// Bytes left.
        available: u64,
    },
    /// A record's fields do not fill its declared length exactly.
    #[error("record body is {actual} bytes but its length field says {declared}")]
    SizeMismatch {
        /// The length field.
        declared: u64,
        /// Bytes the fields took.
        actual: u64,
    },
}

/// Which check a KRaft metadata record (or a KRaft control record's value) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MetadataCorruption {
    /// A record with a null value.
    #[error("a metadata record needs a value, and this one is null")]
    NullValue,
    /// A frame version other than 1.
    #[error("unknown frame version {0} (only frame version 1 is supported)")]
    FrameVersion(u32),
    /// A record type or version past what the frame can hold.
    #[error("{what} {value} is too large")]
    HeaderTooLarge {
        /// What was too large.
        what: &'static str,
        /// Its value.
        value: u32,
    },
    /// A record type Kafka 4.4 does not define.
    #[error("unknown metadata record type {0}")]
    UnknownType(i16),
    /// A version of the record newer than its schema.
    #[error("can't read version {version} of {record}")]
    UnsupportedVersion {
        /// The record type's name.
        record: &'static str,
        /// The version.
        version: i16,
    },
    /// A field that does not decode.
    #[error("{record}: field {field}: {reason}")]
    Field {
        /// The record type's name.
        record: &'static str,
        /// The field.
        field: &'static str,
        /// What was wrong.
        reason: RecordCorruption,
    },
    /// A null in a field that may not be null.
    #[error("{record}: non-nullable field {field} was serialized as null")]
    NullField {
        /// The record type's name.
        record: &'static str,
        /// The field.
        field: &'static str,
    },
    /// A string length past the record.
    #[error("{record}: string field {field} had invalid length {length}")]
    StringLength {
        /// The record type's name.
        record: &'static str,
        /// The field.
        field: &'static str,
        /// The declared length.
        length: u32,
    },
    /// An array announcing more elements than bytes remain.
    #[error("{record}: field {field}: a collection of {length} elements, but only {remaining} bytes remain")]
    ArrayLength {
        /// The record type's name.
        record: &'static str,
        /// The field.
        field: &'static str,
        /// The declared length.
        length: u32,
        /// The bytes left.
        remaining: usize,
    },
    /// A tagged field whose declared size differs from its value's.
    #[error("{record}: tagged field {tag} is {declared} bytes but its value took {used}")]
    TaggedFieldSize {
        /// The record type's name.
        record: &'static str,
        /// The tag.
        tag: u32,
        /// The declared size.
        declared: u32,
        /// The bytes its value used.
        used: usize,
    },
    /// Bytes left after the record.
    #[error("found {bytes} byte(s) of garbage after {record}")]
    Garbage {
        /// The record type's name.
        record: &'static str,
        /// How many bytes were left over.
        bytes: usize,
    },
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

    /// What was refused and why, without the name [`kafka_error`](Self::kafka_error) gives (a
    /// `Rejected` error's `Display` starts with it); any other error: its text.
    pub fn message(&self) -> String {
        match self {
            Error::Rejected { message, .. } => message.clone(),
            other => other.to_string(),
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
