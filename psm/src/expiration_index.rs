//! The expiration index: every producer without an open transaction (and some with one), ordered by a
//! lower bound of their last timestamp, so expiring or evicting costs time proportional to what is
//! removed (plus the keys it refreshes or drops), while an ordinary append leaves the index alone.
//!
//! Every batch moves its producer's last timestamp; keeping the exact `(last_timestamp, producer_id)`
//! in a B-tree cost a removal and an insertion per batch. Instead each indexed producer has exactly one
//! key `(t, producer_id)` with `t <= last_timestamp <= t + MAX_STALENESS_MS`. The entry remembers where
//! its key is in 16 otherwise unused bits (`expiration_lag`), relative to its own last timestamp:
//!
//! | `expiration_lag` | the key's `t` |
//! |---|---|
//! | [`NOT_INDEXED`] | no key (only with an open transaction: Kafka never expires it) |
//! | [`EXACT`] | `last_timestamp` |
//! | `lag` below `0x8000` | `((last_timestamp >> SHIFT) - lag) << SHIFT` |
//!
//! A later timestamp within reach only changes `lag`; an earlier timestamp or one more than ~2.3 h later
//! moves the key. A transaction opening or ending leaves the key where it is: a transactional producer
//! opens and ends one every few batches, and moving its key each time cost a B-tree removal and
//! insertion per transaction. Readers of the index check each key they meet against the entry: a
//! stale key moves to the exact timestamp (so a key is refreshed at most once per change of its entry),
//! and the key of an entry with an open transaction is dropped until the transaction ends (so each
//! open transaction is skipped at most once).

use std::collections::BTreeSet;

use crate::producer_state_entry::{ProducerStateEntry, NOT_INDEXED};

pub(crate) const EXACT: u16 = 0x8000;
const MAX_LAG: i64 = 0x7fff;
/// Keys in steps of 256 ms: a lag reaches 0x7fff * 256 ms, about 2.3 h.
const SHIFT: u32 = 8;
/// How far below an entry's last timestamp its key may be.
pub(crate) const MAX_STALENESS_MS: i64 = ((MAX_LAG + 1) << SHIFT) - 1;

#[derive(Debug, Clone, Default)]
pub(crate) struct ExpirationIndex {
    keys: BTreeSet<(i64, i64)>,
}

/// The key `entry` has in the index, from its `expiration_lag` and last timestamp.
#[inline]
pub(crate) fn indexed_key(entry: &ProducerStateEntry) -> Option<(i64, i64)> {
    let t = match entry.expiration_lag() {
        NOT_INDEXED => return None,
        EXACT => entry.last_timestamp(),
        lag => ((entry.last_timestamp() >> SHIFT) - i64::from(lag)) << SHIFT,
    };
    Some((t, entry.producer_id()))
}

/// The key a newly indexed entry gets: its timestamp rounded down to a step, so later timestamps of the
/// same producer stay within reach.
#[inline]
fn fresh_key(last_timestamp: i64) -> i64 {
    (last_timestamp >> SHIFT) << SHIFT
}

impl ExpirationIndex {
    /// Brings `entry`'s key in step after a change; `before` is the key it had before the change
    /// ([`indexed_key`] of the entry as it was). Inlined for the usual case, a later timestamp that
    /// keeps the key, with or without a transaction.
    #[inline]
    pub(crate) fn resync(&mut self, entry: &mut ProducerStateEntry, before: Option<(i64, i64)>) {
        if let Some((t, _)) = before {
            if let Some(lag) = lag_of(t, entry.last_timestamp()) {
                entry.set_expiration_lag(lag);
                return;
            }
        }
        self.move_key(entry, before);
    }

    /// [`resync`](Self::resync) when the key has to move, or the entry has none.
    #[inline(never)]
    fn move_key(&mut self, entry: &mut ProducerStateEntry, before: Option<(i64, i64)>) {
        if let Some(key) = before {
            self.keys.remove(&key);
        }
        if entry.current_txn_first_offset().is_some() {
            // It cannot expire before its transaction ends, and then it gets a fresh key.
            entry.set_expiration_lag(NOT_INDEXED);
            return;
        }
        self.insert_fresh(entry, entry.last_timestamp());
    }

    /// Drops the key of an entry with an open transaction that a reader met.
    pub(crate) fn drop_key(&mut self, entry: &mut ProducerStateEntry) {
        self.remove(entry);
        entry.set_expiration_lag(NOT_INDEXED);
    }

    fn insert_fresh(&mut self, entry: &mut ProducerStateEntry, last_timestamp: i64) {
        self.keys
            .insert((fresh_key(last_timestamp), entry.producer_id()));
        entry.set_expiration_lag(0);
    }

    /// Moves `entry`'s key from `t` to its exact last timestamp (a reader met a stale key).
    pub(crate) fn refresh_exact(&mut self, entry: &mut ProducerStateEntry, t: i64) {
        self.keys.remove(&(t, entry.producer_id()));
        self.keys
            .insert((entry.last_timestamp(), entry.producer_id()));
        entry.set_expiration_lag(EXACT);
    }

    pub(crate) fn remove(&mut self, entry: &ProducerStateEntry) {
        if let Some(key) = indexed_key(entry) {
            self.keys.remove(&key);
        }
    }

    /// The keys with a timestamp in `low..=high`, in order.
    pub(crate) fn keys_in(&self, low: i64, high: i64) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.keys.range((low, i64::MIN)..=(high, i64::MAX)).copied()
    }

    pub(crate) fn first(&self) -> Option<(i64, i64)> {
        self.keys.first().copied()
    }

    pub(crate) fn clear(&mut self) {
        self.keys.clear();
    }

    /// Panics unless the keys are exactly those of `entries`, each within reach of its timestamp, and
    /// every entry without an open transaction has one.
    pub(crate) fn assert_consistent<'a>(
        &self,
        entries: impl Iterator<Item = &'a ProducerStateEntry>,
    ) {
        let mut expected = BTreeSet::new();
        for entry in entries {
            let key = indexed_key(entry);
            assert!(
                key.is_some() || entry.current_txn_first_offset().is_some(),
                "an entry without an open transaction is indexed: {entry:?}"
            );
            if let Some((t, producer_id)) = key {
                let last_timestamp = entry.last_timestamp();
                assert!(
                    t <= last_timestamp && last_timestamp - t <= MAX_STALENESS_MS,
                    "key {t} out of reach of {last_timestamp}"
                );
                expected.insert((t, producer_id));
            }
        }
        assert_eq!(expected, self.keys, "expiration index out of step");
    }
}

/// The lag that keeps key `t` for `last_timestamp`, if `t` is still a valid key for it.
#[inline]
fn lag_of(t: i64, last_timestamp: i64) -> Option<u16> {
    if t == last_timestamp {
        return Some(if t == fresh_key(t) { 0 } else { EXACT });
    }
    if t != fresh_key(t) || t > last_timestamp {
        return None;
    }
    let lag = (last_timestamp >> SHIFT) - (t >> SHIFT);
    (lag <= MAX_LAG).then_some(lag as u16)
}
