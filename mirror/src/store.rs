//! The `__mirror_state` store: N partitions of klog's own partition log holding `MirrorPartitionState`
//! and `LastMirrorEpoch` records (KIP-1279 §4). A write is appended to the key's coordinator partition and
//! flushed before it returns, so a state is on disk before its actions run. Opening replays every
//! partition from its start; tombstones remove keys.

use std::collections::BTreeMap;
use std::sync::Arc;

use klog_log::format::{AnyBatch, BatchBuilder, Batches, Compression};
use klog_log::partition_log::PartitionLog;

use crate::error::Error;
use crate::records::{MirrorKey, MirrorRecord, PartitionStateValue};

/// The internal topic's name.
pub const MIRROR_STATE_TOPIC: &str = "__mirror_state";

/// A value and the `__mirror_state` offset it was written at (both kinds of one key share a partition,
/// so their offsets are comparable: an LME newer than the STOPPING state belongs to that stop).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored<T> {
    pub value: T,
    pub offset: i64,
}

pub struct MirrorStateStore {
    partitions: Vec<Arc<PartitionLog>>,
    states: BTreeMap<MirrorKey, Stored<PartitionStateValue>>,
    lmes: BTreeMap<MirrorKey, Stored<i32>>,
    now: Arc<dyn Fn() -> i64 + Send + Sync>,
    sync: bool,
}

impl std::fmt::Debug for MirrorStateStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorStateStore")
            .field("partitions", &self.partitions.len())
            .field("states", &self.states.len())
            .finish()
    }
}

impl MirrorStateStore {
    /// Replays `partitions` (the `__mirror_state-<i>` logs, in partition order).
    pub fn open(
        partitions: Vec<Arc<PartitionLog>>,
        now: Arc<dyn Fn() -> i64 + Send + Sync>,
    ) -> Result<Self, Error> {
        let mut store = MirrorStateStore {
            partitions,
            states: BTreeMap::new(),
            lmes: BTreeMap::new(),
            now,
            sync: true,
        };
        for p in 0..store.partitions.len() {
            store.replay(p)?;
        }
        Ok(store)
    }

    fn replay(&mut self, p: usize) -> Result<(), Error> {
        let log = Arc::clone(&self.partitions[p]);
        let mut offset = log.log_start_offset();
        let end = log.log_end_offset();
        let mut scratch = Vec::new();
        while offset < end {
            let read = log.read(offset, 1 << 20, Some(end), true)?;
            if read.next_offset <= offset {
                break;
            }
            for batch in Batches::new(read.records.as_slice()) {
                let AnyBatch::V2(batch) = batch? else {
                    return Err(Error::corrupt_state(
                        p,
                        offset,
                        "a legacy (v0/v1) batch".into(),
                    ));
                };
                if batch.is_control() {
                    continue;
                }
                for record in batch.records(&mut scratch)? {
                    let record = record?;
                    let decoded = MirrorRecord::decode(record.key, record.value)
                        .map_err(|e| Error::corrupt_state(p, record.offset, e))?;
                    self.apply(decoded, record.offset);
                }
            }
            offset = read.next_offset;
        }
        Ok(())
    }

    fn apply(&mut self, record: MirrorRecord, offset: i64) {
        match record {
            MirrorRecord::State(k, Some(value)) => {
                self.states.insert(k, Stored { value, offset });
            }
            MirrorRecord::State(k, None) => {
                self.states.remove(&k);
            }
            MirrorRecord::LastMirrorEpoch(k, Some(value)) => {
                self.lmes.insert(k, Stored { value, offset });
            }
            MirrorRecord::LastMirrorEpoch(k, None) => {
                self.lmes.remove(&k);
            }
        }
    }

    /// Whether writes are synced before `write` returns (always, except in benchmarks of that cost).
    pub fn set_sync(&mut self, sync: bool) {
        self.sync = sync;
    }

    pub fn partition_count(&self) -> u32 {
        self.partitions.len() as u32
    }

    /// Appends `records` (one batch per coordinator partition), flushes them, then updates the cache.
    pub fn write(&mut self, records: Vec<MirrorRecord>) -> Result<(), Error> {
        let n = self.partition_count();
        let mut by_partition: BTreeMap<u32, Vec<MirrorRecord>> = BTreeMap::new();
        for r in records {
            by_partition
                .entry(r.key().coordinator_partition(n))
                .or_default()
                .push(r);
        }
        let now = (self.now)();
        for (p, records) in by_partition {
            let log = Arc::clone(&self.partitions[p as usize]);
            let mut b = BatchBuilder::new(Compression::None);
            for r in &records {
                let (k, v) = r.encode();
                b.append(now, Some(&k), v.as_deref(), &[])?;
            }
            let mut bytes = b.build()?;
            let info = log.append_as_leader(&mut bytes, 0)?;
            log.update_high_watermark(log.log_end_offset());
            if self.sync {
                log.flush(log.log_end_offset())?;
            }
            for (i, r) in records.into_iter().enumerate() {
                self.apply(r, info.first_offset + i as i64);
            }
        }
        Ok(())
    }

    pub fn state(&self, key: &MirrorKey) -> Option<&Stored<PartitionStateValue>> {
        self.states.get(key)
    }

    pub fn last_mirror_epoch(&self, key: &MirrorKey) -> Option<&Stored<i32>> {
        self.lmes.get(key)
    }

    pub fn states(&self) -> impl Iterator<Item = (&MirrorKey, &Stored<PartitionStateValue>)> {
        self.states.iter()
    }

    /// Every key of `mirror` in either record kind (for DeleteMirror's tombstones).
    pub fn keys_of(&self, mirror: &str) -> Vec<MirrorKey> {
        let mut keys: Vec<MirrorKey> = self
            .states
            .keys()
            .chain(self.lmes.keys())
            .filter(|k| k.mirror == mirror)
            .cloned()
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// Tombstones for every record of `mirror`.
    pub fn tombstones_of(&self, mirror: &str) -> Vec<MirrorRecord> {
        let mut out = Vec::new();
        for k in self.keys_of(mirror) {
            if self.states.contains_key(&k) {
                out.push(MirrorRecord::State(k.clone(), None));
            }
            if self.lmes.contains_key(&k) {
                out.push(MirrorRecord::LastMirrorEpoch(k, None));
            }
        }
        out
    }
}
