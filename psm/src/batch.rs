//! What the producer-state rules need to know about one v2 record batch, and where an append comes from.
//!
//! The partition log builds a [`BatchSummary`] from each checked batch view; this crate never sees bytes
//! of a batch, which keeps it pure.

/// The no-producer sentinel (`RecordBatch.NO_PRODUCER_ID`).
pub const NO_PRODUCER_ID: i64 = -1;
/// The no-epoch sentinel (`RecordBatch.NO_PRODUCER_EPOCH`).
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// What a control batch carries, read from its first record (`ControlRecordType` in the key, and for
/// markers the `EndTxnMarker` value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlKind {
    /// A COMMIT transaction marker (control type 1).
    Commit {
        /// The epoch of the transaction coordinator that wrote the marker.
        coordinator_epoch: i32,
    },
    /// An ABORT transaction marker (control type 0).
    Abort {
        /// The epoch of the transaction coordinator that wrote the marker.
        coordinator_epoch: i32,
    },
    /// The KIP-1279 barrier (control type 7): forget all producer state. Written with producer id −1.
    MirrorPidReset,
    /// A control batch with no record left: the log cleaner removed the whole transaction. Kafka ignores
    /// the marker, but a batch with a producer id still registers that producer (with unchanged state).
    Empty,
    /// Any other control type (the KRaft ones, or an unknown id). Fine with producer id −1; with a
    /// producer id Kafka tries to parse it as a transaction marker and fails.
    Other,
}

/// One batch of an append, as the producer-state rules see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchSummary {
    /// `producerId`; below 0 the batch carries no producer state (except a MIRROR_PID_RESET barrier).
    pub producer_id: i64,
    /// The batch's producer epoch ([`NO_PRODUCER_EPOCH`] without a producer).
    pub producer_epoch: i16,
    /// `baseSequence`.
    pub first_sequence: i32,
    /// Kafka's `lastSequence()`: `baseSequence + lastOffsetDelta`, wrapping at `i32::MAX`, or −1 when
    /// `baseSequence` is −1.
    pub last_sequence: i32,
    /// `baseOffset` (the offset the log assigned).
    pub first_offset: i64,
    /// `baseOffset + lastOffsetDelta`.
    pub last_offset: i64,
    /// The header's `maxTimestamp`; for a control batch, the timestamp of its first record (the same
    /// value for Kafka's one-record marker batches).
    pub max_timestamp: i64,
    /// Whether the batch belongs to a transaction (attributes bit 4).
    pub is_transactional: bool,
    /// `None` for a data batch.
    pub control: Option<ControlKind>,
}

impl BatchSummary {
    /// Kafka's `hasProducerId()`: a producer id of 0 or more.
    pub fn has_producer_id(&self) -> bool {
        self.producer_id > NO_PRODUCER_ID
    }

    /// Whether this is the KIP-1279 MIRROR_PID_RESET barrier.
    pub fn is_mirror_pid_reset(&self) -> bool {
        self.control == Some(ControlKind::MirrorPidReset)
    }
}

/// Who is appending (`AppendOrigin`). It decides how much is validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AppendOrigin {
    /// A producer's request: duplicates are detected and sequences checked.
    Client,
    /// The group or transaction coordinator: epochs are checked, sequences are not.
    Coordinator,
    /// A follower or mirror fetch, or a replay during recovery: already validated by the leader, so a
    /// stale producer epoch or coordinator epoch is accepted.
    Replication,
}

/// The transaction version a coordinator ended a transaction under (Kafka's `TransactionVersion`,
/// KIP-890). It is not in a marker's bytes: only the coordinator's `WriteTxnMarkers` request carries
/// it, so only the coordinator can say it. A follower or a replay sees the bytes alone and appends with
/// [`TransactionVersion::UNKNOWN`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TransactionVersion(pub i16);

impl TransactionVersion {
    /// `TV_UNKNOWN`: data batches, and every append whose origin cannot know the version.
    pub const UNKNOWN: TransactionVersion = TransactionVersion(-1);
    /// Transaction version 0: the classic protocol.
    pub const TV_0: TransactionVersion = TransactionVersion(0);
    /// Transaction version 1 (KIP-890 part 1): still the classic marker rules.
    pub const TV_1: TransactionVersion = TransactionVersion(1);
    /// The coordinator bumps the producer epoch before it writes each marker.
    pub const TV_2: TransactionVersion = TransactionVersion(2);

    /// From transaction version 2 on, a marker's epoch must be above the producer's current epoch.
    pub fn marker_bumps_epoch(self) -> bool {
        self.0 >= 2
    }
}
