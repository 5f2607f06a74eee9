//! `.txnindex`: one 34-byte entry per aborted transaction whose ABORT marker is in the segment
//! (`TransactionIndex.java`, `AbortedTxn.java`). Append-only; the file exists only once it has an entry.

use std::path::PathBuf;
use std::sync::Arc;

use zerocopy::byteorder::big_endian::{I16, I64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::error::IoContext;
use crate::io::{Storage, StorageFile};
use crate::Error;

/// An aborted transaction: `version int16 (0) | producer_id | first_offset | last_offset | last_stable_offset`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct AbortedTxn {
    /// Entry version (0).
    pub version: I16,
    /// The producer whose transaction aborted.
    pub producer_id: I64,
    /// The transaction's first offset.
    pub first_offset: I64,
    /// The offset of its ABORT marker.
    pub last_offset: I64,
    /// The last stable offset when the marker was written.
    pub last_stable_offset: I64,
}

const _: () = assert!(core::mem::size_of::<AbortedTxn>() == 34);

impl AbortedTxn {
    /// An entry of version 0.
    pub fn new(
        producer_id: i64,
        first_offset: i64,
        last_offset: i64,
        last_stable_offset: i64,
    ) -> Self {
        AbortedTxn {
            version: I16::new(0),
            producer_id: I64::new(producer_id),
            first_offset: I64::new(first_offset),
            last_offset: I64::new(last_offset),
            last_stable_offset: I64::new(last_stable_offset),
        }
    }
}

/// Parses a `.txnindex` file's bytes; a partial trailing entry is ignored, as Kafka does.
pub fn parse_entries(bytes: &[u8]) -> Result<Vec<AbortedTxn>, &'static str> {
    let whole = bytes.len() / 34 * 34;
    let entries =
        <[AbortedTxn]>::ref_from_bytes(&bytes[..whole]).expect("unaligned POD of a whole size");
    // Kafka reads only the first byte of the version.
    if entries.iter().any(|e| e.version.get() >> 8 != 0) {
        return Err("unexpected aborted transaction version");
    }
    Ok(entries.to_vec())
}

/// A segment's `.txnindex`: the aborted transactions whose markers are in the segment.
#[derive(Debug)]
pub struct TxnIndex {
    storage: Arc<dyn Storage>,
    path: PathBuf,
    file: Option<Arc<dyn StorageFile>>,
    entries: Vec<AbortedTxn>,
    persisted: usize,
}

impl TxnIndex {
    /// Opens the index at `path`, reading it if it exists.
    pub fn open(storage: Arc<dyn Storage>, path: PathBuf) -> Result<Self, Error> {
        let (file, entries, persisted) = match storage.open(&path) {
            Ok(file) => {
                let bytes = crate::io::read_file(storage.as_ref(), &path)
                    .at(&path)?
                    .unwrap_or_default();
                let entries = parse_entries(&bytes).map_err(|reason| Error::CorruptIndex {
                    path: path.clone(),
                    reason: reason.into(),
                })?;
                let persisted = entries.len() * 34;
                (Some(file), entries, persisted)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, Vec::new(), 0),
            Err(e) => return Err(Error::io(&path, e)),
        };
        Ok(TxnIndex {
            storage,
            path,
            file,
            entries,
            persisted,
        })
    }

    /// The entries, in marker order.
    pub fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    /// Appends an entry; `last_offset` must increase (Kafka's `TransactionIndex.append` refuses the entry
    /// otherwise). The entries already there may come from the file, so an out-of-order append is an error
    /// naming the index, not a panic.
    pub fn append(&mut self, txn: AbortedTxn) -> Result<(), Error> {
        if let Some(last) = self.entries.last() {
            if txn.last_offset.get() <= last.last_offset.get() {
                return Err(Error::CorruptIndex {
                    path: self.path.clone(),
                    reason: format!(
                        "aborted transaction with last offset {} appended after one with last offset {}: \
                         the last offsets must increase",
                        txn.last_offset.get(),
                        last.last_offset.get()
                    ),
                });
            }
        }
        self.entries.push(txn);
        Ok(())
    }

    /// Writes entries not yet in the file, creating it on the first one.
    pub fn flush(&mut self) -> Result<(), Error> {
        let bytes = self.entries.as_bytes();
        if self.persisted >= bytes.len() {
            return Ok(());
        }
        if self.file.is_none() {
            self.file = Some(self.storage.create(&self.path).at(&self.path)?);
        }
        let file = self.file.as_ref().expect("created above");
        file.write_at(&bytes[self.persisted..], self.persisted as u64)
            .at(&self.path)?;
        self.persisted = bytes.len();
        Ok(())
    }

    /// Makes the appended entries durable.
    pub fn sync(&mut self) -> Result<(), Error> {
        self.flush()?;
        if let Some(f) = &self.file {
            f.sync().at(&self.path)?;
        }
        Ok(())
    }

    /// Drops entries whose marker is at or after `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), Error> {
        let keep = self
            .entries
            .partition_point(|e| e.last_offset.get() < offset);
        self.entries.truncate(keep);
        let len = keep * 34;
        if self.persisted > len {
            if let Some(f) = &self.file {
                f.set_len(len as u64).at(&self.path)?;
            }
            self.persisted = len;
        }
        Ok(())
    }

    /// Entries overlapping `[fetch_offset, upper_bound)`, and whether the search is complete (an entry's
    /// last stable offset reached `upper_bound`), as Kafka's `collectAbortedTxns`.
    pub fn collect_aborted(&self, fetch_offset: i64, upper_bound: i64) -> (Vec<AbortedTxn>, bool) {
        let mut found = Vec::new();
        for e in &self.entries {
            if e.last_offset.get() >= fetch_offset && e.first_offset.get() < upper_bound {
                found.push(*e);
            }
            if e.last_stable_offset.get() >= upper_bound {
                return (found, true);
            }
        }
        (found, false)
    }

    /// Kafka's `sanityCheck`: no entry's marker before the segment's base offset.
    pub fn sanity_check(&self, base_offset: i64) -> Result<(), Error> {
        match self
            .entries
            .iter()
            .find(|e| e.last_offset.get() < base_offset)
        {
            Some(e) => Err(Error::CorruptIndex {
                path: self.path.clone(),
                reason: format!(
                    "aborted transaction of producer {} (offsets {}..={}) ends before the segment base {base_offset}",
                    e.producer_id.get(),
                    e.first_offset.get(),
                    e.last_offset.get()
                ),
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::SimStorage;
    use std::path::Path;

    #[test]
    fn an_entry_out_of_marker_order_is_refused_not_a_panic() {
        let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(7));
        let dir = Path::new("/log/t-0");
        storage.create_dir_all(dir).unwrap();
        let path = dir.join("00000000000000000000.txnindex");
        let mut index = TxnIndex::open(storage.clone(), path.clone()).unwrap();
        index.append(AbortedTxn::new(1, 0, 100, 0)).unwrap();
        index.flush().unwrap();

        // Reopened from the file, as a cleaner or a recovery would: the next entry's last offset is lower.
        let mut reopened = TxnIndex::open(storage.clone(), path.clone()).unwrap();
        let err = reopened.append(AbortedTxn::new(2, 40, 50, 40)).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("00000000000000000000.txnindex")
                && text.contains("50")
                && text.contains("100"),
            "{text}"
        );
        assert!(
            reopened.append(AbortedTxn::new(2, 40, 100, 40)).is_err(),
            "equal last offsets refused too"
        );
        reopened.append(AbortedTxn::new(2, 101, 120, 101)).unwrap();
        assert_eq!(reopened.entries().len(), 2);
    }
}
