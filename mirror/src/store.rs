//! The `__mirror_state` store: N partitions of klog's own partition log holding `MirrorPartitionState`
//! and `LastMirrorEpoch` records (KIP-1279 §4). A write is appended to the key's coordinator partition and
//! flushed before it returns, so a state is on disk before its actions run; a write of many keys is one
//! batch per coordinator partition, all of them synced together. Opening replays every
//! partition from its start; tombstones remove keys.
//!
//! Compaction is the log cleaner's, as for Kafka's coordinators: the topic is `cleanup.policy=compact`
//! and the node's cleaner (`crate::log_cleaner`) passes over its partitions in the background. A pass
//! keeps each key's latest record at its own offset, so replay reads the same state before and after
//! it, and the order of offsets still tells "an LME written after the STOPPING state".

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
    /// The value.
    pub value: T,
    /// Its offset in `__mirror_state`.
    pub offset: i64,
}

/// `__mirror_state`: the mirror partitions' states and last mirrored epochs, in a compacted internal log.
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

    /// Replays partition `p` into the cache.
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

    /// Partitions of `__mirror_state`.
    pub fn partition_count(&self) -> u32 {
        self.partitions.len() as u32
    }

    /// Appends `records` (one batch per coordinator partition), flushes them, then updates the cache.
    /// The first error of [`MirrorStateStore::write_partitions`], if any.
    pub fn write(&mut self, records: Vec<MirrorRecord>) -> Result<(), Error> {
        self.write_partitions(records)
            .into_values()
            .collect::<Result<Vec<()>, Error>>()
            .map(|_| ())
    }

    /// Appends `records` as one batch per coordinator partition, then syncs those partitions together
    /// (one sync round however many partitions changed), then updates the cache of the batches that
    /// are on disk. Returns each written partition's result: a key's record is persisted exactly when
    /// its partition ([`MirrorStateStore::partition_of`]) is `Ok`.
    pub fn write_partitions(
        &mut self,
        records: Vec<MirrorRecord>,
    ) -> BTreeMap<u32, Result<(), Error>> {
        let n = self.partition_count();
        let mut by_partition: BTreeMap<u32, Vec<MirrorRecord>> = BTreeMap::new();
        for r in self.stamp_state_epochs(records) {
            by_partition
                .entry(r.key().coordinator_partition(n))
                .or_default()
                .push(r);
        }
        let mut results = BTreeMap::new();
        let mut appended = Vec::new();
        for (p, records) in by_partition {
            match self.append_unsynced(p as usize, &records) {
                Ok(first) => appended.push((p, first, records)),
                Err(e) => {
                    results.insert(p, Err(e));
                }
            }
        }
        let synced: Vec<Result<(), Error>> = if self.sync {
            let logs: Vec<&PartitionLog> = appended
                .iter()
                .map(|(p, _, _)| self.partitions[*p as usize].as_ref())
                .collect();
            PartitionLog::flush_each(&logs)
                .into_iter()
                .map(|r| r.map_err(Error::from))
                .collect()
        } else {
            appended.iter().map(|_| Ok(())).collect()
        };
        for ((p, first, records), synced) in appended.into_iter().zip(synced) {
            let result = synced.map(|()| self.applied(first, records));
            results.insert(p, result);
        }
        results
    }

    /// The reference's StateEpoch: each state value written is one above its key's last (the first is
    /// 1), as the reference's coordinator numbers transitions; a tombstone starts the key again.
    fn stamp_state_epochs(&self, mut records: Vec<MirrorRecord>) -> Vec<MirrorRecord> {
        let mut last: BTreeMap<MirrorKey, i32> = BTreeMap::new();
        for r in &mut records {
            match r {
                MirrorRecord::State(k, Some(v)) => {
                    let before = last
                        .get(k)
                        .copied()
                        .or_else(|| self.states.get(k).map(|s| s.value.state_epoch))
                        .unwrap_or(0);
                    v.state_epoch = before.saturating_add(1);
                    last.insert(k.clone(), v.state_epoch);
                }
                MirrorRecord::State(k, None) => {
                    last.insert(k.clone(), 0);
                }
                MirrorRecord::LastMirrorEpoch(..) => {}
            }
        }
        records
    }

    /// The `__mirror_state` partition holding `key`'s records.
    pub fn partition_of(&self, key: &MirrorKey) -> u32 {
        key.coordinator_partition(self.partition_count())
    }

    /// Takes a synced batch starting at `first` into the cache.
    fn applied(&mut self, first: i64, records: Vec<MirrorRecord>) {
        for (i, r) in records.into_iter().enumerate() {
            self.apply(r, first + i as i64);
        }
    }

    /// Appends `records` to partition `p` as one batch, not yet synced; returns the first offset.
    fn append_unsynced(&self, p: usize, records: &[MirrorRecord]) -> Result<i64, Error> {
        let log = &self.partitions[p];
        let now = (self.now)();
        let mut b = BatchBuilder::new(Compression::None);
        for r in records {
            let (k, v) = r.encode();
            b.append(now, Some(&k), v.as_deref(), &[])?;
        }
        let mut bytes = b.build()?;
        let info = log.append_as_leader(&mut bytes, 0)?;
        log.update_high_watermark(log.log_end_offset());
        Ok(info.first_offset)
    }

    /// A partition's stored state.
    pub fn state(&self, key: &MirrorKey) -> Option<&Stored<PartitionStateValue>> {
        self.states.get(key)
    }

    /// A partition's stored last mirrored epoch.
    pub fn last_mirror_epoch(&self, key: &MirrorKey) -> Option<&Stored<i32>> {
        self.lmes.get(key)
    }

    /// Every stored state.
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

    /// Tombstones for every record (state or LME) of a mirror for which `exists` says no: what a
    /// DeleteMirror interrupted by a crash left behind.
    pub fn orphan_tombstones(&self, exists: impl Fn(&str) -> bool) -> Vec<MirrorRecord> {
        let orphans: std::collections::BTreeSet<&str> = self
            .states
            .keys()
            .chain(self.lmes.keys())
            .map(|k| k.mirror.as_str())
            .filter(|m| !exists(m))
            .collect();
        orphans
            .into_iter()
            .flat_map(|m| self.tombstones_of(m))
            .collect()
    }

    /// The partitions whose log failed a write (they refuse writes until reopened).
    pub fn failed_partitions(&self) -> Vec<usize> {
        (0..self.partitions.len())
            .filter(|&p| self.partitions[p].is_failed())
            .collect()
    }

    /// Puts a reopened (recovered) log in place of partition `p` and replays it: the cache then holds
    /// what that partition's log holds after recovery.
    pub fn replace_partition(&mut self, p: usize, log: Arc<PartitionLog>) -> Result<(), Error> {
        let n = self.partition_count();
        let elsewhere = |k: &MirrorKey| k.coordinator_partition(n) as usize != p;
        self.states.retain(|k, _| elsewhere(k));
        self.lmes.retain(|k, _| elsewhere(k));
        self.partitions[p] = log;
        self.replay(p)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::MirrorState;
    use klog_log::checkpoint::TopicId;
    use klog_log::clock::ManualClock;
    use klog_log::io::{SimStorage, Storage};
    use klog_log::partition_log::OpenOptions;
    use std::path::Path;

    fn key(p: i32) -> MirrorKey {
        MirrorKey {
            mirror: "m".into(),
            topic_id: TopicId::parse("AAAAAAAAAAAAAAAAAAAAAQ").unwrap(),
            partition: p,
        }
    }

    fn open(storage: &Arc<dyn Storage>) -> MirrorStateStore {
        let config = klog_log::config::LogConfig::from_pairs([
            "cleanup.policy=compact",
            "segment.bytes=65536",
        ])
        .unwrap();
        let (log, _) = PartitionLog::open_with_clock(
            Arc::clone(storage),
            Path::new("/sim/__mirror_state-0"),
            config,
            OpenOptions::default(),
            Arc::new(ManualClock::new(1_700_000_000_000)),
        )
        .unwrap();
        MirrorStateStore::open(vec![Arc::new(log)], Arc::new(|| 1_700_000_000_000)).unwrap()
    }

    /// A store of `partitions` partitions on `storage`.
    fn open_many(storage: &Arc<dyn Storage>, partitions: usize) -> MirrorStateStore {
        let logs = (0..partitions)
            .map(|p| {
                let config = klog_log::config::LogConfig::from_pairs([
                    "retention.ms=-1",
                    "segment.bytes=65536",
                ])
                .unwrap();
                let dir = format!("/sim/__mirror_state-{p}");
                let (log, _) = PartitionLog::open_with_clock(
                    Arc::clone(storage),
                    Path::new(&dir),
                    config,
                    OpenOptions::default(),
                    Arc::new(ManualClock::new(1_700_000_000_000)),
                )
                .unwrap();
                Arc::new(log)
            })
            .collect();
        MirrorStateStore::open(logs, Arc::new(|| 1_700_000_000_000)).unwrap()
    }

    /// A write of many keys over every partition, the power cut at each of its storage operations in
    /// turn: a partition reported written holds its records after the crash (they were synced before
    /// the write returned), and the cache changed exactly for the partitions reported written.
    #[test]
    fn a_write_of_many_partitions_reports_each_partition_durable_or_not() {
        let keys: Vec<MirrorKey> = (0..12).map(key).collect();
        let mut crashed = 0;
        for k in 1.. {
            let sim = Arc::new(SimStorage::new(k));
            let storage: Arc<dyn Storage> = sim.clone();
            let mut store = open_many(&storage, 3);
            let before: Vec<_> = keys
                .iter()
                .map(|k| MirrorRecord::State(k.clone(), state(MirrorState::Mirroring)))
                .collect();
            store.write(before).unwrap();
            let start = sim.ops();
            sim.power_off_at(start + k);
            let after = keys
                .iter()
                .map(|k| MirrorRecord::State(k.clone(), state(MirrorState::Stopping)))
                .collect();
            let written = store.write_partitions(after);
            let finished = sim.ops() < start + k;
            assert_eq!(written.len(), 3, "k={k}: every partition holds some key");
            let ok = |key: &MirrorKey| written[&store.partition_of(key)].is_ok();
            for key in &keys {
                let expect = if ok(key) {
                    MirrorState::Stopping
                } else {
                    MirrorState::Mirroring
                };
                assert_eq!(store.state(key).unwrap().value.state, expect, "k={k}");
            }
            let reported: Vec<bool> = keys.iter().map(ok).collect();
            drop(store);
            sim.crash(true);
            sim.clear_faults();
            let store = open_many(&storage, 3);
            for (key, ok) in keys.iter().zip(reported) {
                let now = store.state(key).unwrap().value.state;
                if ok {
                    assert_eq!(
                        now,
                        MirrorState::Stopping,
                        "k={k}: a reported write was lost"
                    );
                } else {
                    assert!(
                        matches!(now, MirrorState::Mirroring | MirrorState::Stopping),
                        "k={k}: {now:?}"
                    );
                }
            }
            if finished {
                break;
            }
            crashed += 1;
        }
        assert!(crashed >= 3, "{crashed}");
    }

    fn state(s: MirrorState) -> Option<PartitionStateValue> {
        Some(PartitionStateValue::new(s))
    }

    /// A `__mirror_state` a klog from before #25 wrote (the older layout and numbering, bytes by hand)
    /// opens with its states read right, and a new write beside them is in the reference layout.
    #[test]
    fn a_store_in_the_older_layout_opens_with_its_states() {
        let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(3));
        let store = open(&storage);
        let (k0, _) = MirrorRecord::State(key(0), None).encode();
        let (k1, _) = MirrorRecord::State(key(1), None).encode();
        let (k2, _) = MirrorRecord::LastMirrorEpoch(key(1), None).encode();
        // key 0: STOPPED (5), previous STOPPING (4); key 1: STOPPING (4) with its LME 7 in tag 1.
        let stopped = [0u8, 0, 5, 4, 0, 0, 0, 0];
        let stopping = [0u8, 0, 4, 1, 0, 0, 0, 1, 1, 4, 0, 0, 0, 7];
        let lme = [0u8, 0, 0, 0, 0, 7, 0];
        let mut b = BatchBuilder::new(Compression::None);
        b.append(1, Some(&k0), Some(&stopped), &[]).unwrap();
        b.append(1, Some(&k1), Some(&stopping), &[]).unwrap();
        b.append(1, Some(&k2), Some(&lme), &[]).unwrap();
        let mut bytes = b.build().unwrap();
        store.partitions[0].append_as_leader(&mut bytes, 0).unwrap();
        store.partitions[0].flush(i64::MAX).unwrap();
        drop(store);
        let mut store = open(&storage);
        let s0 = &store.state(&key(0)).unwrap().value;
        assert_eq!(
            (s0.state, s0.previous),
            (MirrorState::Stopped, MirrorState::Stopping)
        );
        let s1 = &store.state(&key(1)).unwrap().value;
        assert_eq!(
            (s1.state, s1.previous, s1.stopping_last_mirror_epoch),
            (MirrorState::Stopping, MirrorState::Mirroring, Some(7))
        );
        assert_eq!(store.last_mirror_epoch(&key(1)).unwrap().value, 7);
        store
            .write(vec![MirrorRecord::State(
                key(1),
                state(MirrorState::Stopped),
            )])
            .unwrap();
        drop(store);
        let store = open(&storage);
        assert_eq!(
            store.state(&key(1)).unwrap().value.state,
            MirrorState::Stopped
        );
        assert_eq!(
            store.state(&key(0)).unwrap().value.state,
            MirrorState::Stopped
        );
    }

    #[test]
    fn each_state_written_is_one_state_epoch_above_the_last_of_its_key() {
        let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(5));
        let mut store = open(&storage);
        store
            .write(vec![
                MirrorRecord::State(key(0), state(MirrorState::Preparing)),
                MirrorRecord::State(key(0), state(MirrorState::Mirroring)),
                MirrorRecord::State(key(1), state(MirrorState::Preparing)),
            ])
            .unwrap();
        assert_eq!(store.state(&key(0)).unwrap().value.state_epoch, 2);
        assert_eq!(store.state(&key(1)).unwrap().value.state_epoch, 1);
        drop(store);
        let mut store = open(&storage);
        assert_eq!(store.state(&key(0)).unwrap().value.state_epoch, 2);
        store
            .write(vec![MirrorRecord::State(
                key(0),
                state(MirrorState::Stopping),
            )])
            .unwrap();
        assert_eq!(store.state(&key(0)).unwrap().value.state_epoch, 3);
        store
            .write(vec![
                MirrorRecord::State(key(0), None),
                MirrorRecord::State(key(0), state(MirrorState::Preparing)),
            ])
            .unwrap();
        assert_eq!(store.state(&key(0)).unwrap().value.state_epoch, 1);
    }

    /// The log cleaner's pass over a `__mirror_state` partition keeps what replay reads: the latest
    /// state of each key, a tombstone's absence, and an LME that still follows its STOPPING record.
    #[test]
    fn a_cleaner_pass_keeps_the_replayed_state_and_the_order_of_offsets() {
        use klog_log::cleaner::{CleanOptions, CleanerConfig};
        let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(7));
        let mut store = open(&storage);
        for i in 0..5000 {
            let s = if i % 2 == 0 {
                MirrorState::Paused
            } else {
                MirrorState::Mirroring
            };
            store
                .write(vec![MirrorRecord::State(key(i % 4), state(s))])
                .unwrap();
        }
        for r in [
            MirrorRecord::State(key(3), None),
            MirrorRecord::State(key(1), state(MirrorState::Stopping)),
            MirrorRecord::LastMirrorEpoch(key(1), Some(5)),
        ] {
            store.write(vec![r]).unwrap();
        }
        let expect = |s: &MirrorStateStore| {
            let states: Vec<_> = (0..4)
                .map(|p| s.state(&key(p)).map(|v| v.value.state))
                .collect();
            assert_eq!(
                states,
                [
                    Some(MirrorState::Paused),
                    Some(MirrorState::Stopping),
                    Some(MirrorState::Paused),
                    None
                ]
            );
            let (st, lme) = (
                s.state(&key(1)).unwrap().offset,
                s.last_mirror_epoch(&key(1)).unwrap(),
            );
            assert_eq!(lme.value, 5);
            assert!(lme.offset > st, "the LME still follows its STOPPING record");
        };
        expect(&store);
        let log = Arc::clone(&store.partitions[0]);
        log.roll().unwrap();
        let before = log.size_in_bytes();
        let opts = CleanOptions {
            now_ms: 1_700_000_000_000,
            ..CleanOptions::default()
        };
        let report = log.clean(&CleanerConfig::default(), &opts, None).unwrap();
        assert!(report.cleaned, "{report:?}");
        assert!(
            log.size_in_bytes() * 50 < before,
            "{} of {before}",
            log.size_in_bytes()
        );
        drop((store, log));
        // Replaying the cleaned log gives the same state.
        expect(&open(&storage));
    }
}
