//! KIP-227 incremental fetch sessions, the client's side (what Kafka's `FetchSessionHandler` keeps per
//! broker). The first fetch to a broker is full (session id 0, epoch 0: "create a session") and
//! carries every partition; the broker answers with a session id. Each later fetch is incremental: it
//! carries only the partitions whose fetch state changed (offset, current leader epoch, last fetched
//! epoch, partition max bytes) or are new, forgets (`ForgottenTopicsData`) those no longer asked for,
//! and the broker answers only for partitions with something to say (records, a moved watermark, an
//! error). The epoch goes up by one with each answered request.
//!
//! A broker that lost the session (FETCH_SESSION_ID_NOT_FOUND) or saw an epoch it did not expect
//! (INVALID_FETCH_SESSION_EPOCH) is sent a full fetch again; so is one that declined to create a
//! session (its answer carried session id 0). Plain values, testable without a broker.

use std::collections::BTreeMap;

use klog_log::checkpoint::TopicId;

use crate::source::{FetchRequest, Isolation};

/// Kafka's `FetchMetadata.INITIAL_EPOCH`: a full fetch that creates a session (closing the one its
/// session id names, if any).
pub(super) const INITIAL_EPOCH: i32 = 0;
/// Kafka's `FetchMetadata.FINAL_EPOCH`: with session id 0, a full fetch that creates no session.
pub(super) const FINAL_EPOCH: i32 = -1;
/// The broker no longer has the session (evicted, restarted): start a new one.
pub(super) const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
/// The session exists but the epoch sent is not the next one: start a new one.
pub(super) const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
/// A session's topic ids became inconsistent (a topic recreated): start a new one.
pub(super) const FETCH_SESSION_TOPIC_ID_ERROR: i16 = 106;

/// A partition as a session names it.
pub(super) type PartitionKey = (TopicId, i32);

/// What a partition's fetch asks for, as the broker's session remembers it: a change in any of these
/// must be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PartitionFetchState {
    pub(super) fetch_offset: i64,
    pub(super) current_leader_epoch: i32,
    pub(super) last_fetched_epoch: i32,
    pub(super) partition_max_bytes: i32,
}

impl PartitionFetchState {
    pub(super) fn of(req: &FetchRequest) -> PartitionFetchState {
        PartitionFetchState {
            fetch_offset: req.fetch_offset,
            current_leader_epoch: req.current_leader_epoch,
            last_fetched_epoch: req.last_fetched_epoch.unwrap_or(-1),
            partition_max_bytes: i32::try_from(req.max_bytes).unwrap_or(i32::MAX).max(1),
        }
    }
}

/// A partition a fetch wants this round: its key, topic name (forgetting it at Fetch v12 needs the
/// name) and state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Wanted {
    pub(super) key: PartitionKey,
    pub(super) topic: String,
    pub(super) state: PartitionFetchState,
}

/// The next request of a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SessionRequest {
    pub(super) session_id: i32,
    pub(super) session_epoch: i32,
    /// Indices into the wanted partitions of those the request carries.
    pub(super) send: Vec<usize>,
    /// Partitions the session holds that this round does not want: (topic name, key).
    pub(super) forget: Vec<(String, PartitionKey)>,
}

impl SessionRequest {
    /// A full fetch (it creates a session, or none).
    pub(super) fn is_full(&self) -> bool {
        self.session_epoch == INITIAL_EPOCH || self.session_epoch == FINAL_EPOCH
    }

    /// A full fetch outside any session (a retry at a leader that moved mid-round).
    pub(super) fn sessionless(wanted: &[Wanted]) -> SessionRequest {
        SessionRequest {
            session_id: 0,
            session_epoch: FINAL_EPOCH,
            send: (0..wanted.len()).collect(),
            forget: Vec::new(),
        }
    }
}

/// One broker's fetch session as the client keeps it.
#[derive(Debug, Clone, Default)]
pub(super) struct FetchSession {
    /// 0: none (yet).
    id: i32,
    /// The epoch the next request carries; `INITIAL_EPOCH`: the next request is full.
    epoch: i32,
    /// The isolation level the session's fetches use (a change starts a new session).
    isolation: Option<Isolation>,
    /// What the broker's session holds, per partition.
    partitions: BTreeMap<PartitionKey, (String, PartitionFetchState)>,
}

impl FetchSession {
    /// The session id (0: none).
    pub(super) fn id(&self) -> i32 {
        self.id
    }

    /// The epoch the next request carries.
    pub(super) fn epoch(&self) -> i32 {
        self.epoch
    }

    /// The next request for the partitions wanted this round.
    pub(super) fn next_request(&self, wanted: &[Wanted], isolation: Isolation) -> SessionRequest {
        if self.epoch == INITIAL_EPOCH || self.isolation != Some(isolation) {
            return SessionRequest {
                session_id: self.id,
                session_epoch: INITIAL_EPOCH,
                send: (0..wanted.len()).collect(),
                forget: Vec::new(),
            };
        }
        let send = wanted
            .iter()
            .enumerate()
            .filter(|(_, w)| self.partitions.get(&w.key).map(|(_, s)| s) != Some(&w.state))
            .map(|(i, _)| i)
            .collect();
        let forget = self
            .partitions
            .iter()
            .filter(|(key, _)| !wanted.iter().any(|w| &w.key == *key))
            .map(|(key, (topic, _))| (topic.clone(), *key))
            .collect();
        SessionRequest {
            session_id: self.id,
            session_epoch: self.epoch,
            send,
            forget,
        }
    }

    /// The broker answered `request` without a top-level error, naming `response_session_id`.
    pub(super) fn answered(
        &mut self,
        request: &SessionRequest,
        wanted: &[Wanted],
        isolation: Isolation,
        response_session_id: i32,
    ) {
        if request.is_full() {
            self.partitions.clear();
            self.isolation = Some(isolation);
            self.id = response_session_id;
            // Session id 0: the broker made no session, so the next fetch is full again.
            self.epoch = if response_session_id == 0 {
                INITIAL_EPOCH
            } else {
                1
            };
        } else if response_session_id != self.id {
            // Not the session we spoke to: start over rather than guess what it holds.
            self.failed(FETCH_SESSION_ID_NOT_FOUND);
            return;
        } else {
            for (_, key) in &request.forget {
                self.partitions.remove(key);
            }
            self.epoch = next_epoch(self.epoch);
        }
        for &i in &request.send {
            let w = &wanted[i];
            self.partitions.insert(w.key, (w.topic.clone(), w.state));
        }
    }

    /// The broker answered with top-level `error_code`: the next fetch is full. A session the broker
    /// still has is named in it, so the broker closes it; one it lost is not.
    pub(super) fn failed(&mut self, error_code: i16) {
        if error_code == FETCH_SESSION_ID_NOT_FOUND {
            self.id = 0;
        }
        self.epoch = INITIAL_EPOCH;
        self.partitions.clear();
    }
}

/// Kafka's `FetchMetadata.nextEpoch`: up by one, wrapping past `i32::MAX` to 1 (0 and -1 are taken).
fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted(topic: u8, partition: i32, offset: i64) -> Wanted {
        Wanted {
            key: (TopicId([topic; 16]), partition),
            topic: format!("t{topic}"),
            state: PartitionFetchState {
                fetch_offset: offset,
                current_leader_epoch: 0,
                last_fetched_epoch: -1,
                partition_max_bytes: 1024,
            },
        }
    }

    const RC: Isolation = Isolation::ReadCommitted;

    #[test]
    fn a_session_starts_full_then_sends_only_what_changed_and_forgets_what_went() {
        let mut s = FetchSession::default();
        let round1 = vec![wanted(1, 0, 0), wanted(1, 1, 0), wanted(2, 0, 0)];
        let r = s.next_request(&round1, RC);
        assert_eq!((r.session_id, r.session_epoch), (0, INITIAL_EPOCH));
        assert_eq!(r.send, [0, 1, 2]);
        assert!(r.is_full());
        s.answered(&r, &round1, RC, 77);
        assert_eq!((s.id(), s.epoch()), (77, 1));

        // Nothing changed: an incremental fetch carrying no partition (the broker still answers for
        // those with news).
        let r = s.next_request(&round1, RC);
        assert_eq!((r.session_id, r.session_epoch), (77, 1));
        assert!(r.send.is_empty() && r.forget.is_empty());
        s.answered(&r, &round1, RC, 77);
        assert_eq!(s.epoch(), 2);

        // t1-1 advanced, t2-0 is no longer wanted, t3-0 is new.
        let round3 = vec![wanted(1, 0, 0), wanted(1, 1, 10), wanted(3, 0, 0)];
        let r = s.next_request(&round3, RC);
        assert_eq!(r.send, [1, 2]);
        assert_eq!(r.forget, [("t2".to_owned(), (TopicId([2; 16]), 0))]);
        s.answered(&r, &round3, RC, 77);
        let r = s.next_request(&round3, RC);
        assert!(r.send.is_empty() && r.forget.is_empty(), "{r:?}");
        assert_eq!(r.session_epoch, 3);
    }

    #[test]
    fn session_errors_and_a_declined_session_mean_a_full_fetch_next() {
        let w = vec![wanted(1, 0, 5)];
        let mut s = FetchSession::default();
        let r = s.next_request(&w, RC);
        s.answered(&r, &w, RC, 9);
        s.failed(INVALID_FETCH_SESSION_EPOCH);
        let r = s.next_request(&w, RC);
        assert_eq!(
            (r.session_id, r.session_epoch, r.send.clone()),
            (9, INITIAL_EPOCH, vec![0]),
            "a full fetch that closes session 9"
        );
        s.answered(&r, &w, RC, 10);
        s.failed(FETCH_SESSION_ID_NOT_FOUND);
        let r = s.next_request(&w, RC);
        assert_eq!((r.session_id, r.session_epoch), (0, INITIAL_EPOCH));
        // The broker declines to make a session (its cache is full): full fetches go on.
        s.answered(&r, &w, RC, 0);
        let r = s.next_request(&w, RC);
        assert_eq!((r.session_id, r.session_epoch), (0, INITIAL_EPOCH));
        // A change of isolation starts a new session too.
        s.answered(&r, &w, RC, 11);
        let r = s.next_request(&w, Isolation::ReadUncommitted);
        assert_eq!((r.session_id, r.session_epoch), (11, INITIAL_EPOCH));
        // An incremental answer from another session id: start over.
        let r = s.next_request(&w, RC);
        s.answered(&r, &w, RC, 12);
        assert_eq!(s.next_request(&w, RC).session_epoch, INITIAL_EPOCH);
    }

    #[test]
    fn epochs_wrap_past_the_largest_to_one() {
        assert_eq!(next_epoch(1), 2);
        assert_eq!(next_epoch(i32::MAX), 1);
    }

    #[test]
    fn partition_max_bytes_is_clamped_into_an_i32() {
        let req = FetchRequest {
            topic: "t".into(),
            topic_id: TopicId([1; 16]),
            partition: 0,
            fetch_offset: 3,
            last_fetched_epoch: None,
            current_leader_epoch: 2,
            max_bytes: usize::MAX,
            isolation: RC,
        };
        let s = PartitionFetchState::of(&req);
        assert_eq!(s.partition_max_bytes, i32::MAX);
        assert_eq!(s.last_fetched_epoch, -1);
    }
}
