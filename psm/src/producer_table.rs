//! The producers of a partition (`ProducerStateManager.producers`) and, kept in step with them, an
//! index of the producers that may expire, ordered by last timestamp.
//!
//! Each entry is stored once: a `HashSet` keyed by the entry's own producer id. The index holds
//! `(last_timestamp, producer_id)` for every producer without an open transaction, so expiring or
//! evicting costs time proportional to what is removed.

use std::borrow::Borrow;
use std::collections::{BTreeSet, HashSet};
use std::hash::{Hash, Hasher};

use crate::expiration::expired_timestamp_ranges;
use crate::producer_state_entry::ProducerStateEntry;

/// An entry hashed and compared by producer id only, so the set can be searched with an `i64`.
#[derive(Debug, Clone)]
struct Slot(ProducerStateEntry);

impl Borrow<i64> for Slot {
    fn borrow(&self) -> &i64 {
        self.0.producer_id_ref()
    }
}

impl Hash for Slot {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.producer_id().hash(state);
    }
}

impl PartialEq for Slot {
    fn eq(&self, other: &Self) -> bool {
        self.0.producer_id() == other.0.producer_id()
    }
}

impl Eq for Slot {}

#[derive(Debug, Clone, Default)]
pub(crate) struct ProducerTable {
    entries: HashSet<Slot>,
    by_last_timestamp: BTreeSet<(i64, i64)>,
}

impl ProducerTable {
    pub(crate) fn get(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.entries.get(&producer_id).map(|slot| &slot.0)
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &ProducerStateEntry> {
        self.entries.iter().map(|slot| &slot.0)
    }

    /// Inserts or replaces the producer's entry; returns the entry it replaced.
    pub(crate) fn upsert(&mut self, entry: ProducerStateEntry) -> Option<ProducerStateEntry> {
        let new_key = entry.expiration_key();
        let old = self.entries.replace(Slot(entry)).map(|slot| slot.0);
        if let Some(old_key) = old.as_ref().and_then(ProducerStateEntry::expiration_key) {
            self.by_last_timestamp.remove(&old_key);
        }
        if let Some(key) = new_key {
            self.by_last_timestamp.insert(key);
        }
        old
    }

    pub(crate) fn remove(&mut self, producer_id: i64) -> Option<ProducerStateEntry> {
        let entry = self.entries.take(&producer_id)?.0;
        if let Some(key) = entry.expiration_key() {
            self.by_last_timestamp.remove(&key);
        }
        Some(entry)
    }

    /// Removes every producer without an open transaction whose last timestamp is expired at `now_ms`.
    pub(crate) fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let expired: Vec<i64> = expired_timestamp_ranges(now_ms, expiration_ms)
            .flat_map(|(low, high)| {
                self.by_last_timestamp
                    .range((low, i64::MIN)..=(high, i64::MAX))
                    .map(|(_, producer_id)| *producer_id)
            })
            .collect();
        for producer_id in &expired {
            self.remove(*producer_id);
        }
        expired.len()
    }

    /// Removes the producer without an open transaction that has the oldest last timestamp (the one
    /// expiration would remove first); `None` if every producer has an open transaction.
    pub(crate) fn evict_oldest(&mut self) -> Option<ProducerStateEntry> {
        let (_, producer_id) = *self.by_last_timestamp.first()?;
        self.remove(producer_id)
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.by_last_timestamp.clear();
    }

    /// Panics unless the index holds exactly the expirable producers.
    pub(crate) fn assert_consistent(&self) {
        let expected: BTreeSet<(i64, i64)> = self
            .iter()
            .filter_map(ProducerStateEntry::expiration_key)
            .collect();
        assert_eq!(
            expected, self.by_last_timestamp,
            "expiration index out of step"
        );
    }
}
