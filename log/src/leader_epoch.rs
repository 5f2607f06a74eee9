//! The leader-epoch cache and its `leader-epoch-checkpoint` file (`LeaderEpochFileCache.java`, spec §4.8):
//! the first offset of each leader epoch, written `<epoch> <start_offset>` per line.

use std::path::PathBuf;
use std::sync::Arc;

use crate::checkpoint::{read_checkpoint, write_checkpoint};
use crate::io::Storage;
use crate::Error;

/// One epoch and the first offset written in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    /// The leader epoch.
    pub epoch: i32,
    /// The first offset written in that epoch.
    pub start_offset: i64,
}

/// Kafka's `LeaderEpochFileCache`: (epoch, start offset) pairs, kept in `leader-epoch-checkpoint`.
#[derive(Debug)]
pub struct LeaderEpochCache {
    storage: Arc<dyn Storage>,
    path: PathBuf,
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// Loads the checkpoint (a missing file is an empty cache).
    pub fn open(storage: Arc<dyn Storage>, path: PathBuf) -> Result<Self, Error> {
        let mut entries = Vec::new();
        for (i, e) in read_checkpoint(storage.as_ref(), &path)?
            .into_iter()
            .enumerate()
        {
            let parsed = match e.as_slice() {
                [epoch, offset] => epoch.parse().ok().zip(offset.parse().ok()),
                _ => None,
            };
            let (epoch, start_offset) = parsed.ok_or_else(|| Error::CorruptFile {
                path: path.clone(),
                line: i + 3,
                reason: format!("expected 'epoch offset', got {e:?}"),
            })?;
            entries.push(EpochEntry {
                epoch,
                start_offset,
            });
        }
        Ok(LeaderEpochCache {
            storage,
            path,
            entries,
        })
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The newest entry.
    pub fn latest(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    fn write(&self) -> Result<(), Error> {
        let lines: Vec<String> = self
            .entries
            .iter()
            .map(|e| format!("{} {}", e.epoch, e.start_offset))
            .collect();
        write_checkpoint(self.storage.as_ref(), &self.path, &lines)
    }

    /// Kafka's `assign`: records that `epoch` starts at `start_offset`, dropping later or equal entries it
    /// supersedes; writes the checkpoint when something changed. Negative values are ignored.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<(), Error> {
        if assign_entry(&mut self.entries, epoch, start_offset) {
            self.write()?;
        }
        Ok(())
    }

    /// Recovery's epochs, derived from the batches it scanned (`scanned`: each batch's epoch and base
    /// offset, in offset order, or at least every batch whose epoch differs from the one before it).
    /// Every entry starting at or after `rescanned_from` (the base of the first segment rescanned from
    /// the recovery point; `i64::MAX` when none was) is dropped first: every batch from there on was
    /// scanned, so the batches, not the file, say where those epochs start. Each scanned epoch newer than
    /// the latest entry is then assigned (Kafka's `LogSegment.recover`), and so is the first batch at or
    /// after `rescanned_from`, with Kafka's `assign` (it supersedes kept entries the batch contradicts).
    /// Batches below `rescanned_from` come from segments whose indexes alone were rebuilt: they only add
    /// newer epochs, as in Kafka. The checkpoint is written once, and only if an entry changed: an
    /// unclean open whose batches agree with the file writes nothing.
    pub fn derive(
        &mut self,
        rescanned_from: i64,
        scanned: impl IntoIterator<Item = (i32, i64)>,
    ) -> Result<(), Error> {
        let mut entries: Vec<EpochEntry> = self
            .entries
            .iter()
            .copied()
            .filter(|e| e.start_offset < rescanned_from)
            .collect();
        let mut first_rescanned = true;
        for (epoch, offset) in scanned {
            let newer = entries.last().is_none_or(|l| epoch > l.epoch);
            let first = first_rescanned && offset >= rescanned_from;
            if newer || first {
                assign_entry(&mut entries, epoch, offset);
            }
            first_rescanned &= !first;
        }
        if entries == self.entries {
            return Ok(());
        }
        self.entries = entries;
        self.write()
    }

    /// Removes entries starting at or after `end_offset`.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> Result<(), Error> {
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < end_offset);
        if self.entries.len() != before {
            self.write()?;
        }
        Ok(())
    }

    /// Removes entries that start at or before `start_offset`, keeping the last of them re-based there.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> Result<(), Error> {
        let n = self
            .entries
            .partition_point(|e| e.start_offset <= start_offset);
        if n == 0 {
            return Ok(());
        }
        let last = self.entries[n - 1];
        if n == 1 && last.start_offset == start_offset {
            return Ok(());
        }
        self.entries.drain(..n);
        self.entries.insert(
            0,
            EpochEntry {
                epoch: last.epoch,
                start_offset,
            },
        );
        self.write()
    }

    /// Removes every entry.
    pub fn clear(&mut self) -> Result<(), Error> {
        self.entries.clear();
        self.write()
    }

    /// Kafka's `endOffsetFor(epoch, leo)`: (the largest epoch <= `epoch`, the end offset of that epoch),
    /// `(-1, -1)` when unknown.
    pub fn end_offset_for(&self, epoch: i32, log_end_offset: i64) -> (i32, i64) {
        if epoch < 0 {
            return (-1, -1);
        }
        match self.latest() {
            Some(latest) if latest.epoch == epoch => return (epoch, log_end_offset),
            None => return (-1, -1),
            _ => {}
        }
        let higher = self.entries.iter().find(|e| e.epoch > epoch);
        let floor = self.entries.iter().rev().find(|e| e.epoch <= epoch);
        match (floor, higher) {
            (_, None) => (-1, -1),
            (None, Some(h)) => (epoch, h.start_offset),
            (Some(f), Some(h)) => (f.epoch, h.start_offset),
        }
    }

    /// The epoch of `offset`: the last entry starting at or before it.
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.start_offset <= offset)
            .map(|e| e.epoch)
    }
}

/// Kafka's `LeaderEpochFileCache.assign` on `entries`: nothing if `epoch` is the latest and starts no
/// earlier (or a value is negative); else every entry of an epoch at or above `epoch`, or starting at or
/// after `start_offset`, goes, and the new entry ends the list. Returns whether `entries` changed.
fn assign_entry(entries: &mut Vec<EpochEntry>, epoch: i32, start_offset: i64) -> bool {
    if epoch < 0 || start_offset < 0 {
        return false;
    }
    if let Some(latest) = entries.last() {
        if epoch == latest.epoch && start_offset >= latest.start_offset {
            return false;
        }
    }
    while let Some(last) = entries.last() {
        if last.epoch >= epoch || last.start_offset >= start_offset {
            entries.pop();
        } else {
            break;
        }
    }
    entries.push(EpochEntry {
        epoch,
        start_offset,
    });
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::SimStorage;
    use std::path::Path;

    fn cache() -> (SimStorage, LeaderEpochCache) {
        let sim = SimStorage::new(1);
        sim.create_dir_all(Path::new("/p")).unwrap();
        let c = LeaderEpochCache::open(Arc::new(sim.clone()), "/p/leader-epoch-checkpoint".into())
            .unwrap();
        (sim, c)
    }

    fn pairs(c: &LeaderEpochCache) -> Vec<(i32, i64)> {
        c.entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect()
    }

    #[test]
    fn assign_follows_kafka_and_writes_the_checkpoint() {
        let (sim, mut c) = cache();
        c.assign(0, 0).unwrap();
        c.assign(0, 10).unwrap();
        c.assign(2, 159).unwrap();
        assert_eq!(pairs(&c), [(0, 0), (2, 159)]);
        assert_eq!(
            sim.live_bytes(Path::new("/p/leader-epoch-checkpoint"))
                .unwrap(),
            b"0\n2\n0 0\n2 159\n"
        );
        c.assign(1, 100).unwrap();
        assert_eq!(
            pairs(&c),
            [(0, 0), (1, 100)],
            "a lower epoch replaces later ones"
        );
        c.assign(3, 50).unwrap();
        assert_eq!(
            pairs(&c),
            [(0, 0), (3, 50)],
            "an earlier start replaces later ones"
        );
        c.assign(-1, 60).unwrap();
        assert_eq!(pairs(&c), [(0, 0), (3, 50)]);
        let reopened =
            LeaderEpochCache::open(Arc::new(sim), "/p/leader-epoch-checkpoint".into()).unwrap();
        assert_eq!(pairs(&reopened), [(0, 0), (3, 50)]);
    }

    #[test]
    fn derive_replaces_the_rescanned_range_from_the_batches_and_writes_only_a_change() {
        let (sim, mut c) = cache();
        for (e, o) in [(0, 0), (2, 50), (5, 90)] {
            c.assign(e, o).unwrap();
        }
        let path = Path::new("/p/leader-epoch-checkpoint");
        let before = sim.ops();
        // The batches from 40 on agree with the file: nothing is written.
        c.derive(40, [(0, 40), (2, 50), (2, 60), (5, 90)]).unwrap();
        assert_eq!(pairs(&c), [(0, 0), (2, 50), (5, 90)]);
        assert_eq!(sim.ops(), before, "an unchanged cache is not rewritten");
        // The batches say epoch 2 runs to the end: the entry for 5 goes, and 2 starts where its first
        // batch is.
        c.derive(40, [(0, 40), (2, 55), (2, 95)]).unwrap();
        assert_eq!(pairs(&c), [(0, 0), (2, 55)]);
        assert_eq!(sim.live_bytes(path).unwrap(), b"0\n2\n0 0\n2 55\n");
        // A kept entry the first rescanned batch contradicts (epoch 2 kept at 10, batches in epoch 1).
        c.assign(2, 10).unwrap();
        assert_eq!(pairs(&c), [(0, 0), (2, 10)]);
        c.derive(40, [(1, 40), (1, 45)]).unwrap();
        assert_eq!(pairs(&c), [(0, 0), (1, 40)]);
        // Segments below the rescan (their indexes rebuilt) only add newer epochs, as Kafka's recover.
        c.derive(i64::MAX, [(0, 5), (1, 30), (3, 70), (2, 80)])
            .unwrap();
        assert_eq!(pairs(&c), [(0, 0), (1, 40), (3, 70)]);
        // Nothing scanned in the rescanned range: every entry there goes.
        c.derive(0, []).unwrap();
        assert_eq!(pairs(&c), []);
    }

    #[test]
    fn truncation_and_end_offsets() {
        let (_, mut c) = cache();
        for (e, o) in [(1, 0), (3, 10), (5, 20)] {
            c.assign(e, o).unwrap();
        }
        assert_eq!(c.end_offset_for(5, 30), (5, 30));
        assert_eq!(c.end_offset_for(4, 30), (3, 20));
        assert_eq!(c.end_offset_for(3, 30), (3, 20));
        assert_eq!(c.end_offset_for(0, 30), (0, 0));
        assert_eq!(c.end_offset_for(9, 30), (-1, -1));
        assert_eq!(c.end_offset_for(-1, 30), (-1, -1));
        assert_eq!(c.epoch_for_offset(15), Some(3));
        c.truncate_from_end(20).unwrap();
        assert_eq!(pairs(&c), [(1, 0), (3, 10)]);
        c.truncate_from_start(12).unwrap();
        assert_eq!(pairs(&c), [(3, 12)]);
        c.truncate_from_start(5).unwrap();
        assert_eq!(pairs(&c), [(3, 12)]);
    }
}
