//! Iterating the batches of a byte slice: a segment file, a `.bin` of concatenated batches, a fetch response.
//!
//! The iteration ends cleanly at a partial trailing batch (Kafka's `FileLogInputStream`: fewer than 17 bytes
//! left, or a declared size past the end) and tells a zero-filled preallocated tail apart from corruption:
//! zeros to the end of the data are a tail, not a batch with length 0. Anything else that fails a check is
//! an error, after which the iterator stops.

use super::batch::RecordBatch;
use super::legacy::LegacyEntry;
use super::{HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, MIN_RECORD_OVERHEAD};
use crate::{Corruption, Error};

/// A batch of any magic.
#[derive(Debug, Clone, Copy)]
pub enum AnyBatch<'a> {
    /// A v2 record batch.
    V2(RecordBatch<'a>),
    /// A v0/v1 message (its wrapper, when compressed).
    Legacy(LegacyEntry<'a>),
}

impl<'a> AnyBatch<'a> {
    /// Its byte position in the data.
    pub fn position(&self) -> u64 {
        match self {
            AnyBatch::V2(b) => b.position(),
            AnyBatch::Legacy(e) => e.position(),
        }
    }

    /// Its size in bytes, log overhead included.
    pub fn size_in_bytes(&self) -> usize {
        match self {
            AnyBatch::V2(b) => b.size_in_bytes(),
            AnyBatch::Legacy(e) => e.size_in_bytes(),
        }
    }

    /// Its bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        match self {
            AnyBatch::V2(b) => b.as_bytes(),
            AnyBatch::Legacy(e) => e.as_bytes(),
        }
    }

    /// The base offset (a legacy entry: its own offset, which is the last inner one).
    pub fn base_offset(&self) -> i64 {
        match self {
            AnyBatch::V2(b) => b.base_offset(),
            AnyBatch::Legacy(e) => e.offset,
        }
    }

    /// The last offset it holds.
    pub fn last_offset(&self) -> i64 {
        match self {
            AnyBatch::V2(b) => b.last_offset(),
            AnyBatch::Legacy(e) => e.offset,
        }
    }

    /// The max timestamp (-1 for magic 0).
    pub fn max_timestamp(&self) -> i64 {
        match self {
            AnyBatch::V2(b) => b.max_timestamp(),
            AnyBatch::Legacy(e) => e.timestamp.unwrap_or(-1),
        }
    }
}

/// How the data after the last whole batch looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// The last batch ended exactly at the end of the data.
    Clean,
    /// An incomplete batch: a torn write, or a fetch response cut at its size limit.
    Partial {
        /// Where the tail starts.
        position: u64,
        /// Bytes from there to the end.
        bytes: u64,
    },
    /// Only zero bytes remain: a preallocated file's unwritten tail.
    ZeroFilled {
        /// Where the tail starts.
        position: u64,
        /// Bytes from there to the end.
        bytes: u64,
    },
    /// Iteration stopped at a corrupt batch (the error was yielded); bytes from there on are unread.
    Corrupt {
        /// Where the tail starts.
        position: u64,
        /// Bytes from there to the end.
        bytes: u64,
    },
}

/// How error messages and reports say it: `3 bytes of a partial batch at position 61`.
impl std::fmt::Display for Tail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tail::Clean => f.write_str("none"),
            Tail::Partial { position, bytes } => {
                write!(f, "{bytes} bytes of a partial batch at position {position}")
            }
            Tail::ZeroFilled { position, bytes } => {
                write!(f, "{bytes} zero bytes at position {position}")
            }
            Tail::Corrupt { position, bytes } => {
                write!(
                    f,
                    "{bytes} bytes from a corrupt batch at position {position}"
                )
            }
        }
    }
}

/// Iterator over the batches of `data`. `base_position` is added to every position it reports.
#[derive(Debug, Clone)]
pub struct Batches<'a> {
    rest: &'a [u8],
    position: u64,
    verify_crc: bool,
    tail: Option<Tail>,
}

impl<'a> Batches<'a> {
    /// The batches of `data`, positions counted from 0, CRCs checked.
    pub fn new(data: &'a [u8]) -> Self {
        Self::at(data, 0)
    }

    /// The batches of `data`, positions counted from `base_position` (its place in a file).
    pub fn at(data: &'a [u8], base_position: u64) -> Self {
        Batches {
            rest: data,
            position: base_position,
            verify_crc: true,
            tail: None,
        }
    }

    /// Skips the CRC check, for bytes verified when they were appended. Structure is still checked.
    pub fn without_crc(mut self) -> Self {
        self.verify_crc = false;
        self
    }

    /// How the data ended; `None` until the iterator has returned `None` or an error.
    pub fn tail(&self) -> Option<Tail> {
        self.tail
    }

    /// Position of the next unread byte.
    pub fn position(&self) -> u64 {
        self.position
    }

    fn end(&mut self, tail: Tail) -> Option<Result<AnyBatch<'a>, Error>> {
        self.tail = Some(tail);
        self.rest = &[];
        None
    }

    fn fail(&mut self, err: Error) -> Option<Result<AnyBatch<'a>, Error>> {
        self.tail = Some(Tail::Corrupt {
            position: self.position,
            bytes: self.rest.len() as u64,
        });
        self.rest = &[];
        Some(Err(err))
    }

    fn partial_or_zeros(&self) -> Tail {
        let (position, bytes) = (self.position, self.rest.len() as u64);
        if self.rest.iter().all(|&b| b == 0) {
            Tail::ZeroFilled { position, bytes }
        } else {
            Tail::Partial { position, bytes }
        }
    }
}

impl<'a> Iterator for Batches<'a> {
    type Item = Result<AnyBatch<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.tail.is_some() {
            return None;
        }
        if self.rest.is_empty() {
            return self.end(Tail::Clean);
        }
        if self.rest.len() < HEADER_SIZE_UP_TO_MAGIC {
            let tail = self.partial_or_zeros();
            return self.end(tail);
        }
        let size = i32::from_be_bytes(self.rest[8..12].try_into().expect("4 bytes"));
        if size < MIN_RECORD_OVERHEAD {
            if self.rest.iter().all(|&b| b == 0) {
                let tail = self.partial_or_zeros();
                return self.end(tail);
            }
            let reason = Corruption::BatchLengthTooSmall {
                batch_length: size,
                minimum: MIN_RECORD_OVERHEAD,
            };
            return self.fail(Error::corrupt(self.position, reason));
        }
        if LOG_OVERHEAD as u64 + size as u64 > self.rest.len() as u64 {
            let tail = self.partial_or_zeros();
            return self.end(tail);
        }
        let parsed = match self.rest[16] as i8 {
            2 if self.verify_crc => {
                RecordBatch::parse(self.rest, self.position).map(|(b, r)| (AnyBatch::V2(b), r))
            }
            2 => RecordBatch::parse_unchecked_crc(self.rest, self.position)
                .map(|(b, r)| (AnyBatch::V2(b), r)),
            0 | 1 if self.verify_crc => {
                LegacyEntry::parse(self.rest, self.position).map(|(e, r)| (AnyBatch::Legacy(e), r))
            }
            0 | 1 => LegacyEntry::parse_unchecked_crc(self.rest, self.position)
                .map(|(e, r)| (AnyBatch::Legacy(e), r)),
            magic => Err(Error::corrupt(
                self.position,
                Corruption::BadMagic { magic },
            )),
        };
        match parsed {
            Ok((batch, rest)) => {
                self.position += batch.size_in_bytes() as u64;
                self.rest = rest;
                Some(Ok(batch))
            }
            Err(e) => self.fail(e),
        }
    }
}
