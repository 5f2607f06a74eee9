//! The producers of a partition (`ProducerStateManager.producers`) and, kept in step with them, the
//! expiration index of the producers that may expire.
//!
//! Each entry is stored once, in a hash table keyed by the entry's own producer id and hashed with a
//! seeded folded multiply: one multiplication instead of SipHash's rounds, and a per-table random seed
//! so chosen producer ids cannot aim at one bucket. An append updates its producers' entries in place.

use std::hash::{BuildHasher, RandomState};

use hashbrown::HashTable;

use crate::expiration::expired_timestamp_ranges;
use crate::expiration::is_expired;
use crate::expiration_index::{indexed_key, ExpirationIndex, MAX_STALENESS_MS};
use crate::producer_state_entry::ProducerStateEntry;

/// Hashes producer ids: `(id ^ seed) * K`, folded (the high half of the 128-bit product xor the low).
#[derive(Debug, Clone, Copy)]
struct ProducerIdHasher {
    seed: u64,
}

impl ProducerIdHasher {
    fn random() -> Self {
        ProducerIdHasher {
            seed: RandomState::new().hash_one(0x6b6c_6f67_u64),
        }
    }

    #[inline]
    fn hash(self, producer_id: i64) -> u64 {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let product = u128::from((producer_id as u64) ^ self.seed) * u128::from(K);
        (product as u64) ^ ((product >> 64) as u64)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct ProducerTable {
    hasher: ProducerIdHasher,
    entries: HashTable<ProducerStateEntry>,
    expiration: ExpirationIndex,
}

impl Default for ProducerTable {
    fn default() -> Self {
        ProducerTable {
            hasher: ProducerIdHasher::random(),
            entries: HashTable::new(),
            expiration: ExpirationIndex::default(),
        }
    }
}

impl ProducerTable {
    pub(crate) fn get(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.entries.find(self.hasher.hash(producer_id), |e| {
            e.producer_id() == producer_id
        })
    }

    /// The producer's entry and its bucket, for [`update_at`](Self::update_at).
    pub(crate) fn get_with_bucket(&self, producer_id: i64) -> Option<(usize, &ProducerStateEntry)> {
        let bucket = self
            .entries
            .find_bucket_index(self.hasher.hash(producer_id), |e| {
                e.producer_id() == producer_id
            })?;
        self.entries.get_bucket(bucket).map(|entry| (bucket, entry))
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &ProducerStateEntry> {
        self.entries.iter()
    }

    /// [`update`](Self::update) where `bucket` (from [`get_with_bucket`](Self::get_with_bucket)) may
    /// still hold the producer's entry: then it is updated without hashing. A bucket that no longer
    /// holds it (the table grew or changed since) is only a missed hint.
    pub(crate) fn update_at(
        &mut self,
        bucket: Option<usize>,
        producer_id: i64,
        merge: impl FnOnce(&mut ProducerStateEntry),
    ) {
        if let Some(entry) = bucket
            .and_then(|b| self.entries.get_bucket_mut(b))
            .filter(|e| e.producer_id() == producer_id)
        {
            let before = indexed_key(entry);
            merge(entry);
            self.expiration.resync(entry, before);
            return;
        }
        self.update(producer_id, merge);
    }

    /// Merges an append's result into the producer's entry, in place (`update(nextEntry)`), creating
    /// the entry if the producer is new.
    pub(crate) fn update(&mut self, producer_id: i64, merge: impl FnOnce(&mut ProducerStateEntry)) {
        let hash = self.hasher.hash(producer_id);
        if let Some(entry) = self
            .entries
            .find_mut(hash, |e| e.producer_id() == producer_id)
        {
            let before = indexed_key(entry);
            merge(entry);
            self.expiration.resync(entry, before);
            return;
        }
        let mut entry = ProducerStateEntry::empty(producer_id);
        merge(&mut entry);
        self.insert_new(hash, entry);
    }

    /// [`update`](Self::update) with a change that may be refused: `change` must leave the entry as
    /// it was when it returns an error, and a new producer's entry is then not created.
    pub(crate) fn try_update<R, E>(
        &mut self,
        producer_id: i64,
        change: impl FnOnce(&mut ProducerStateEntry) -> Result<R, E>,
    ) -> Result<R, E> {
        let hash = self.hasher.hash(producer_id);
        let mut fresh = None;
        let found = self
            .entries
            .find_mut(hash, |e| e.producer_id() == producer_id);
        let is_new = found.is_none();
        // One call site for `change`, so it is inlined: the entry found, or a new one beside.
        let entry = match found {
            Some(entry) => entry,
            None => fresh.insert(ProducerStateEntry::empty(producer_id)),
        };
        let before = indexed_key(entry);
        let changed = change(entry)?;
        if !is_new {
            self.expiration.resync(entry, before);
        } else if let Some(entry) = fresh {
            self.insert_new(hash, entry);
        }
        Ok(changed)
    }

    fn insert_new(&mut self, hash: u64, mut entry: ProducerStateEntry) {
        self.expiration.resync(&mut entry, None);
        let hasher = self.hasher;
        self.entries
            .insert_unique(hash, entry, |e| hasher.hash(e.producer_id()));
    }

    /// Inserts or replaces the producer's entry; returns the entry it replaced.
    pub(crate) fn upsert(&mut self, entry: ProducerStateEntry) -> Option<ProducerStateEntry> {
        let old = self.remove(entry.producer_id());
        let hash = self.hasher.hash(entry.producer_id());
        self.insert_new(hash, entry);
        old
    }

    pub(crate) fn remove(&mut self, producer_id: i64) -> Option<ProducerStateEntry> {
        let hash = self.hasher.hash(producer_id);
        let found = self
            .entries
            .find_entry(hash, |e| e.producer_id() == producer_id)
            .ok()?;
        let (entry, _) = found.remove();
        self.expiration.remove(&entry);
        Some(entry)
    }

    /// Removes every producer without an open transaction whose last timestamp is expired at `now_ms`.
    /// Only keys that may belong to an expired producer are visited: a key is at most
    /// `MAX_STALENESS_MS` below its entry's timestamp, and a stale key visited is moved to the exact one.
    pub(crate) fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let candidates: Vec<(i64, i64)> = expired_timestamp_ranges(now_ms, expiration_ms)
            .flat_map(|(low, high)| {
                self.expiration
                    .keys_in(low.saturating_sub(MAX_STALENESS_MS), high)
            })
            .collect();
        let mut removed = 0;
        for (t, producer_id) in candidates {
            let hash = self.hasher.hash(producer_id);
            let Some(entry) = self
                .entries
                .find_mut(hash, |e| e.producer_id() == producer_id)
            else {
                continue;
            };
            if indexed_key(entry) != Some((t, producer_id)) {
                continue;
            }
            if entry.current_txn_first_offset().is_some() {
                self.expiration.drop_key(entry);
                continue;
            }
            if is_expired(now_ms, entry.last_timestamp(), expiration_ms) {
                self.remove(producer_id);
                removed += 1;
            } else if t != entry.last_timestamp() {
                self.expiration.refresh_exact(entry, t);
            }
        }
        removed
    }

    /// Removes the producer without an open transaction that has the oldest last timestamp (the one
    /// expiration would remove first); `None` if every producer has an open transaction.
    pub(crate) fn evict_oldest(&mut self) -> Option<ProducerStateEntry> {
        loop {
            let (t, producer_id) = self.expiration.first()?;
            let hash = self.hasher.hash(producer_id);
            let entry = self
                .entries
                .find_mut(hash, |e| e.producer_id() == producer_id)
                .expect("every key of the expiration index belongs to an entry");
            if entry.current_txn_first_offset().is_some() {
                self.expiration.drop_key(entry);
                continue;
            }
            // The smallest key is a lower bound of every indexed timestamp: exact, it is the oldest.
            if t == entry.last_timestamp() {
                return self.remove(producer_id);
            }
            self.expiration.refresh_exact(entry, t);
        }
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.expiration.clear();
    }

    /// Panics unless the index holds every expirable producer, and only keys of its entries.
    pub(crate) fn assert_consistent(&self) {
        self.expiration.assert_consistent(self.iter());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch_metadata::BatchMetadata;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        /// A producer's new last timestamp, with or without an open transaction after it.
        Update {
            producer_id: i64,
            timestamp: i64,
            open_txn: bool,
        },
        Expire {
            now_ms: i64,
            expiration_ms: i64,
        },
        Evict,
        Remove(i64),
    }

    fn timestamp() -> impl Strategy<Value = i64> {
        prop_oneof![
            any::<i64>(),
            (i64::MAX - MAX_STALENESS_MS)..=i64::MAX,
            i64::MIN..(i64::MIN + MAX_STALENESS_MS),
            -MAX_STALENESS_MS..MAX_STALENESS_MS,
            1_800_000_000_000i64..1_800_030_000_000,
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0i64..6, timestamp(), proptest::bool::weighted(0.2)).prop_map(
                |(producer_id, timestamp, open_txn)| Op::Update { producer_id, timestamp, open_txn }
            ),
            2 => (timestamp(), prop_oneof![0i64..20_000_000, any::<i64>()])
                .prop_map(|(now_ms, expiration_ms)| Op::Expire { now_ms, expiration_ms }),
            1 => Just(Op::Evict),
            1 => (0i64..6).prop_map(Op::Remove),
        ]
    }

    fn expirable(table: &ProducerTable) -> Vec<(i64, i64)> {
        let mut keys: Vec<_> = table
            .iter()
            .filter(|e| e.current_txn_first_offset().is_none())
            .map(|e| (e.last_timestamp(), e.producer_id()))
            .collect();
        keys.sort_unstable();
        keys
    }

    proptest! {
        /// Whatever the timestamps do (backwards, far forwards, near the ends of i64), expiry and
        /// eviction with the lazy index remove exactly what an exact scan would.
        #[test]
        fn the_lazy_index_expires_and_evicts_exactly(ops in proptest::collection::vec(op(), 1..60)) {
            let mut table = ProducerTable::default();
            for op in ops {
                match op {
                    Op::Update { producer_id, timestamp, open_txn } => {
                        let batch = BatchMetadata { last_seq: 0, last_offset: 10, offset_delta: 0, timestamp };
                        let txn = if open_txn { 10 } else { -1 };
                        table.update(producer_id, |e| e.update(0, &[batch], 0, txn, timestamp));
                    }
                    Op::Expire { now_ms, expiration_ms } => {
                        let survivors: Vec<_> = expirable(&table)
                            .into_iter()
                            .filter(|(t, _)| !is_expired(now_ms, *t, expiration_ms))
                            .collect();
                        let expected = expirable(&table).len() - survivors.len();
                        prop_assert_eq!(table.remove_expired(now_ms, expiration_ms), expected);
                        prop_assert_eq!(expirable(&table), survivors);
                    }
                    Op::Evict => {
                        let oldest = expirable(&table).first().map(|(_, p)| *p);
                        prop_assert_eq!(table.evict_oldest().map(|e| e.producer_id()), oldest);
                    }
                    Op::Remove(producer_id) => {
                        table.remove(producer_id);
                    }
                }
                table.assert_consistent();
            }
        }
    }
}
