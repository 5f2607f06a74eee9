//! `.index`: sparse map from offsets to `.log` positions (`OffsetIndex.java`). 8-byte entries:
//! `relative_offset int32 | position int32`, strictly increasing offsets.

use std::path::PathBuf;
use std::sync::Arc;

use zerocopy::byteorder::big_endian::I32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::index::{count_at_or_below, IndexEntry, IndexFile};
use crate::io::Storage;
use crate::Error;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
/// An `.index` entry: 8 bytes, big-endian.
#[repr(C)]
pub struct OffsetEntry {
    /// The offset relative to the segment's base.
    pub relative_offset: I32,
    /// The batch's byte position in the `.log`.
    pub position: I32,
}

const _: () = assert!(core::mem::size_of::<OffsetEntry>() == 8);

/// An entry in an error message, as Kafka's dump names its fields.
fn show_entry(e: &OffsetEntry) -> String {
    format!(
        "(offset {} position {})",
        e.relative_offset.get(),
        e.position.get()
    )
}

impl IndexEntry for OffsetEntry {
    fn relative_offset(&self) -> i32 {
        self.relative_offset.get()
    }
}

/// An offset index of the segment starting at `base_offset`.
#[derive(Debug)]
pub struct OffsetIndex {
    base_offset: i64,
    file: IndexFile<OffsetEntry>,
}

impl OffsetIndex {
    /// An offset index over `file` for the segment based at `base_offset`.
    pub fn new(base_offset: i64, file: IndexFile<OffsetEntry>) -> Self {
        OffsetIndex { base_offset, file }
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
    pub fn file(&mut self) -> &mut IndexFile<OffsetEntry> {
        &mut self.file
    }

    /// Whether `offset` fits in a relative int32 (else the segment must roll).
    pub fn can_append_offset(&self, offset: i64) -> bool {
        offset
            .checked_sub(self.base_offset)
            .is_some_and(|relative| (0..=i32::MAX as i64).contains(&relative))
    }

    /// Kafka's `isFull`.
    pub fn is_full(&mut self) -> Result<bool, Error> {
        Ok(self.file.len()? >= self.file.max_entries())
    }

    /// The last indexed offset, or the base offset when empty.
    pub fn last_offset(&mut self) -> Result<i64, Error> {
        let base = self.base_offset;
        Ok(self
            .file
            .entries()?
            .last()
            .map_or(base, |e| base + e.relative_offset.get() as i64))
    }

    /// Appends `(offset, position)`. Offsets must increase and fit the segment: the log checks before.
    pub fn append(&mut self, offset: i64, position: u32) -> Result<(), Error> {
        assert!(
            self.can_append_offset(offset),
            "offset {offset} overflows segment {}",
            self.base_offset
        );
        let entries = self.file.len()?;
        assert!(
            entries < self.file.max_entries(),
            "append to a full offset index"
        );
        if entries > 0 {
            let last = self.last_offset()?;
            assert!(
                offset > last,
                "offset index entries must increase: {offset} after {last}"
            );
        }
        self.file.push(OffsetEntry {
            relative_offset: I32::new((offset - self.base_offset) as i32),
            position: I32::new(position as i32),
        })
    }

    /// The largest entry with offset <= `target`, as (offset, position); `(base, 0)` if none.
    pub fn lookup(&mut self, target: i64) -> Result<(i64, u32), Error> {
        let base = self.base_offset;
        let entries = self.file.entries()?;
        let n = count_at_or_below(entries, target, |e| base + e.relative_offset.get() as i64);
        Ok(match n {
            0 => (base, 0),
            n => {
                let e = entries[n - 1];
                (
                    base + e.relative_offset.get() as i64,
                    e.position.get() as u32,
                )
            }
        })
    }

    /// The entry `back` places before the largest one with offset <= `target` (0: that entry), as
    /// (offset, position); None when there is no such entry. A reader that finds an entry pointing at the
    /// wrong bytes tries the ones before it.
    pub fn entry_at_or_below(
        &mut self,
        target: i64,
        back: usize,
    ) -> Result<Option<(i64, u32)>, Error> {
        let base = self.base_offset;
        let entries = self.file.entries()?;
        let n = count_at_or_below(entries, target, |e| base + e.relative_offset.get() as i64);
        Ok(n.checked_sub(back + 1).map(|i| {
            let e = entries[i];
            (
                base + e.relative_offset.get() as i64,
                e.position.get() as u32,
            )
        }))
    }

    /// The largest entry with offset <= `target` and the entry after it, each as (offset, position) when
    /// there is one: one search for the two places a read's lookup may start (see `segment/lookup.rs`).
    pub fn entries_around(&mut self, target: i64) -> Result<[Option<(i64, u32)>; 2], Error> {
        let base = self.base_offset;
        let entries = self.file.entries()?;
        let n = count_at_or_below(entries, target, |e| base + e.relative_offset.get() as i64);
        let at = |i: usize| {
            entries.get(i).map(|e| {
                (
                    base + e.relative_offset.get() as i64,
                    e.position.get() as u32,
                )
            })
        };
        Ok([n.checked_sub(1).and_then(at), at(n)])
    }

    /// The first entry as (offset, position), if any.
    pub fn first_entry(&mut self) -> Result<Option<(i64, u32)>, Error> {
        let base = self.base_offset;
        Ok(self.file.entries()?.first().map(|e| {
            (
                base + e.relative_offset.get() as i64,
                e.position.get() as u32,
            )
        }))
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

    /// Kafka's `sanityCheck`, made stricter: whole entries, and offsets and positions that increase.
    pub fn sanity_check(&mut self) -> Result<(), Error> {
        let path = self.file.path().to_owned();
        let corrupt = |reason: String| Error::CorruptIndex {
            path: path.clone(),
            reason,
        };
        if self.file.trailing_bytes()? != 0 {
            return Err(corrupt("length is not a multiple of 8".into()));
        }
        let mut last: Option<OffsetEntry> = None;
        for e in self.file.entries()? {
            if e.relative_offset.get() < 0 || e.position.get() < 0 {
                return Err(corrupt(format!("negative entry {}", show_entry(e))));
            }
            if let Some(l) = last {
                if e.relative_offset.get() <= l.relative_offset.get()
                    || e.position.get() <= l.position.get()
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
