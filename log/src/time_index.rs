//! `.timeindex`: the largest timestamp seen up to a batch, and that batch's offset (`TimeIndex.java`).
//! 12-byte entries: `timestamp int64 | relative_offset int32`. An entry is written only when the timestamp
//! grows; the last slot is kept for the entry written when the segment rolls or closes.

use std::path::PathBuf;
use std::sync::Arc;

use zerocopy::byteorder::big_endian::{I32, I64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::index::{IndexEntry, IndexFile};
use crate::io::Storage;
use crate::Error;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
/// A `.timeindex` entry: 12 bytes, big-endian.
#[repr(C)]
pub struct TimeEntry {
    /// The largest timestamp so far.
    pub timestamp: I64,
    /// The offset (relative to the base) of the record holding it.
    pub relative_offset: I32,
}

const _: () = assert!(core::mem::size_of::<TimeEntry>() == 12);

/// An entry in an error message, as Kafka's dump names its fields.
fn show_entry(e: &TimeEntry) -> String {
    format!(
        "(timestamp {} offset {})",
        e.timestamp.get(),
        e.relative_offset.get()
    )
}

impl IndexEntry for TimeEntry {
    fn relative_offset(&self) -> i32 {
        self.relative_offset.get()
    }
}

/// A time index of the segment starting at `base_offset`.
#[derive(Debug)]
pub struct TimeIndex {
    base_offset: i64,
    file: IndexFile<TimeEntry>,
}

impl TimeIndex {
    /// A time index over `file` for the segment based at `base_offset`.
    pub fn new(base_offset: i64, file: IndexFile<TimeEntry>) -> Self {
        TimeIndex { base_offset, file }
    }

    /// Creates the index file.
    pub fn create(
        storage: Arc<dyn Storage>,
        path: PathBuf,
        base_offset: i64,
        max_bytes: usize,
    ) -> Result<Self, Error> {
        Ok(Self::new(
            base_offset,
            IndexFile::create(storage, path, max_bytes)?,
        ))
    }

    /// The underlying file.
    pub fn file(&mut self) -> &mut IndexFile<TimeEntry> {
        &mut self.file
    }

    /// Kafka's `isFull`: the last slot is reserved for the closing entry.
    pub fn is_full(&mut self) -> Result<bool, Error> {
        Ok(self.file.len()? + 1 >= self.file.max_entries())
    }

    /// The last entry as (timestamp, offset); `(-1, base)` when empty.
    pub fn last_entry(&mut self) -> Result<(i64, i64), Error> {
        let base = self.base_offset;
        Ok(self.file.entries()?.last().map_or((-1, base), |e| {
            (e.timestamp.get(), base + e.relative_offset.get() as i64)
        }))
    }

    /// Kafka's `maybeAppend`: written only if `timestamp` is greater than the last entry's.
    pub fn maybe_append(
        &mut self,
        timestamp: i64,
        offset: i64,
        skip_full_check: bool,
    ) -> Result<(), Error> {
        if !skip_full_check {
            assert!(!self.is_full()?, "append to a full time index");
        }
        let (last_ts, last_offset) = self.last_entry()?;
        let entries = self.file.len()?;
        assert!(
            entries == 0 || offset >= last_offset,
            "time index offset {offset} before {last_offset}"
        );
        if timestamp > last_ts {
            self.file.push(TimeEntry {
                timestamp: I64::new(timestamp),
                relative_offset: I32::new((offset - self.base_offset) as i32),
            })?;
        }
        Ok(())
    }

    /// The largest entry with timestamp <= `target` as (timestamp, offset); `(-1, base)` if none.
    pub fn lookup(&mut self, target: i64) -> Result<(i64, i64), Error> {
        let base = self.base_offset;
        let entries = self.file.entries()?;
        let n = entries.partition_point(|e| e.timestamp.get() <= target);
        Ok(match n {
            0 => (-1, base),
            n => (
                entries[n - 1].timestamp.get(),
                base + entries[n - 1].relative_offset.get() as i64,
            ),
        })
    }

    /// Drops entries with offset >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), Error> {
        let base = self.base_offset;
        let keep = self
            .file
            .entries()?
            .partition_point(|e| base + (e.relative_offset.get() as i64) < offset);
        self.file.truncate_entries(keep)
    }

    /// Kafka's `sanityCheck`, made stricter: whole entries, timestamps and offsets never decreasing.
    pub fn sanity_check(&mut self) -> Result<(), Error> {
        let path = self.file.path().to_owned();
        let corrupt = |reason: String| Error::CorruptIndex {
            path: path.clone(),
            reason,
        };
        if self.file.trailing_bytes()? != 0 {
            return Err(corrupt("length is not a multiple of 12".into()));
        }
        let mut last: Option<TimeEntry> = None;
        for e in self.file.entries()? {
            if e.relative_offset.get() < 0 {
                return Err(corrupt(format!("negative offset in {}", show_entry(e))));
            }
            if let Some(l) = last {
                if e.timestamp.get() <= l.timestamp.get()
                    || e.relative_offset.get() < l.relative_offset.get()
                {
                    return Err(corrupt(format!(
                        "entry {} does not follow {}",
                        show_entry(e),
                        show_entry(&l)
                    )));
                }
            }
            last = Some(*e);
        }
        Ok(())
    }
}
