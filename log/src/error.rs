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

impl Error {
    pub(crate) fn corrupt(position: u64, reason: Corruption) -> Self {
        Error::CorruptBatch { position, reason }
    }
}
