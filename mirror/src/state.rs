//! The mirror partition state machine (KIP-1279 §1.1, §1.2, §11): states, their persisted encodings
//! (the reference's numbering, which klog writes, and the older one klog wrote before it) and the
//! transition table.

use std::fmt;

/// A mirror partition's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MirrorState {
    /// Truncating the local log to the last mirrored epoch the source reports (the reference's
    /// LOG_ALIGNMENT).
    Preparing,
    /// A fetched batch carried an epoch above the local leader epoch: the local epoch is bumped above
    /// the source's (persisted) before mirroring goes on (the reference's EPOCH_FENCING).
    EpochFencing,
    /// The source truncated below our log end while mirroring (an unclean leader election there) and
    /// the mirror allows it (`mirror.support.unclean.leader.election`): converge by Kafka's follower
    /// truncation, then mirror (the reference's ULE_RECOVERY).
    UleRecovery,
    /// The fetcher copies the source partition.
    Mirroring,
    /// A pause was requested; the fetcher is being removed.
    Pausing,
    /// No fetcher; read-only. Resuming goes straight to MIRRORING from the local log end.
    Paused,
    /// Failover in progress: LME recorded, epoch bumped, truncated to the LSO, barrier written.
    Stopping,
    /// The topic is writable on this cluster.
    Stopped,
    /// An error; retried with exponential backoff unless marked non-retryable.
    Failed,
    /// No state recorded: the absence of state, never an explicit target.
    Unknown,
}

/// Every state, in encoding order.
pub const ALL_STATES: [MirrorState; 10] = [
    MirrorState::Preparing,
    MirrorState::EpochFencing,
    MirrorState::UleRecovery,
    MirrorState::Mirroring,
    MirrorState::Pausing,
    MirrorState::Paused,
    MirrorState::Stopping,
    MirrorState::Stopped,
    MirrorState::Failed,
    MirrorState::Unknown,
];

impl MirrorState {
    /// The persisted encoding klog writes: the reference's numbering (showuon/kafka
    /// `server-common/.../server/mirror/MirrorPartitionState.java`), LOG_ALIGNMENT 0 .. FAILED 8,
    /// UNKNOWN -1.
    pub fn to_byte(self) -> i8 {
        match self {
            MirrorState::Preparing => 0,
            MirrorState::EpochFencing => 1,
            MirrorState::UleRecovery => 2,
            MirrorState::Mirroring => 3,
            MirrorState::Pausing => 4,
            MirrorState::Paused => 5,
            MirrorState::Stopping => 6,
            MirrorState::Stopped => 7,
            MirrorState::Failed => 8,
            MirrorState::Unknown => -1,
        }
    }

    /// Decodes a state in the reference's numbering.
    pub fn from_byte(b: i8) -> Option<Self> {
        ALL_STATES.into_iter().find(|s| s.to_byte() == b)
    }

    /// The older numbering (aiven/kafka's, and what klog wrote before it took the reference's):
    /// PREPARING 0, MIRRORING 1, PAUSING 2, PAUSED 3, STOPPING 4, STOPPED 5, FAILED 6, UNKNOWN 16, with
    /// EPOCH_FENCING 7 and ULE_RECOVERY 8 as klog wrote them in that layout for a while (aiven has
    /// neither).
    pub fn to_older_byte(self) -> i8 {
        match self {
            MirrorState::Preparing => 0,
            MirrorState::Mirroring => 1,
            MirrorState::Pausing => 2,
            MirrorState::Paused => 3,
            MirrorState::Stopping => 4,
            MirrorState::Stopped => 5,
            MirrorState::Failed => 6,
            MirrorState::EpochFencing => 7,
            MirrorState::UleRecovery => 8,
            MirrorState::Unknown => 16,
        }
    }

    /// Decodes a state in the older numbering.
    pub fn from_older_byte(b: i8) -> Option<Self> {
        ALL_STATES.into_iter().find(|s| s.to_older_byte() == b)
    }

    /// The state's name, as Kafka spells it (`MIRRORING`).
    pub fn name(self) -> &'static str {
        match self {
            MirrorState::Preparing => "PREPARING",
            MirrorState::EpochFencing => "EPOCH_FENCING",
            MirrorState::UleRecovery => "ULE_RECOVERY",
            MirrorState::Mirroring => "MIRRORING",
            MirrorState::Pausing => "PAUSING",
            MirrorState::Paused => "PAUSED",
            MirrorState::Stopping => "STOPPING",
            MirrorState::Stopped => "STOPPED",
            MirrorState::Failed => "FAILED",
            MirrorState::Unknown => "UNKNOWN",
        }
    }

    /// Whether a leader append (a client's produce) is refused: everything but STOPPED.
    pub fn is_read_only(self) -> bool {
        self != MirrorState::Stopped
    }

    /// The reference's name (`LOG_ALIGNMENT` for klog's PREPARING; the others are the same).
    pub fn reference_name(self) -> &'static str {
        match self {
            MirrorState::Preparing => "LOG_ALIGNMENT",
            other => other.name(),
        }
    }

    /// The transition table of §1.2 (P1 `isValidTransition`), with two documented extensions:
    /// FAILED -> MIRRORING (P2: a failed fetch retries without truncating again) and UNKNOWN -> STOPPING
    /// (a topic removed from its mirror before any state was recorded would otherwise stay read-only).
    /// A self-transition is always valid: it re-runs the state's actions.
    pub fn can_transition_to(self, target: MirrorState) -> bool {
        use MirrorState::*;
        if self == target {
            return true;
        }
        match target {
            Preparing => matches!(self, Unknown | Stopped | Failed),
            // The reference's (MPM `isValidStateTransition`): both entered from MIRRORING only.
            EpochFencing | UleRecovery => self == Mirroring,
            Mirroring => matches!(
                self,
                Preparing | Paused | Failed | EpochFencing | UleRecovery
            ),
            Pausing => self == Mirroring,
            Paused => self == Pausing,
            Stopping => matches!(
                self,
                Preparing
                    | Mirroring
                    | Pausing
                    | Paused
                    | Failed
                    | Unknown
                    | EpochFencing
                    | UleRecovery
            ),
            Stopped => self == Stopping,
            Failed => true,
            Unknown => false,
        }
    }
}

impl serde::Serialize for MirrorState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl fmt::Display for MirrorState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for MirrorState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        ALL_STATES
            .iter()
            .copied()
            .find(|st| {
                st.name().eq_ignore_ascii_case(s) || st.reference_name().eq_ignore_ascii_case(s)
            })
            .ok_or_else(|| format!("unknown mirror state {s:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use MirrorState::*;

    /// The reference's values, from showuon/kafka's `MirrorPartitionState.java`, and the older ones,
    /// from aiven/kafka's: written out, not derived from the encoder.
    #[test]
    fn both_numberings_decode_and_the_reference_is_written() {
        let reference = [
            (0, Preparing),
            (1, EpochFencing),
            (2, UleRecovery),
            (3, Mirroring),
            (4, Pausing),
            (5, Paused),
            (6, Stopping),
            (7, Stopped),
            (8, Failed),
            (-1, Unknown),
        ];
        for (b, s) in reference {
            assert_eq!(MirrorState::from_byte(b), Some(s));
            assert_eq!(s.to_byte(), b);
        }
        let older = [
            (0, Preparing),
            (1, Mirroring),
            (2, Pausing),
            (3, Paused),
            (4, Stopping),
            (5, Stopped),
            (6, Failed),
            (16, Unknown),
            (7, EpochFencing),
            (8, UleRecovery),
        ];
        for (b, s) in older {
            assert_eq!(MirrorState::from_older_byte(b), Some(s));
        }
        for b in [9, 16, 100, -2] {
            assert_eq!(MirrorState::from_byte(b), None, "{b}");
        }
        for b in [9, -1, 100] {
            assert_eq!(MirrorState::from_older_byte(b), None, "{b}");
        }
        for s in ALL_STATES {
            assert_eq!(s.name().parse::<MirrorState>().unwrap(), s);
            assert_eq!(s.reference_name().parse::<MirrorState>().unwrap(), s);
        }
        assert_eq!(Preparing.reference_name(), "LOG_ALIGNMENT");
    }

    #[test]
    fn transition_table_matches_the_spec() {
        let valid: &[(MirrorState, &[MirrorState])] = &[
            (Preparing, &[Unknown, Stopped, Failed]),
            (EpochFencing, &[Mirroring]),
            (UleRecovery, &[Mirroring]),
            (
                Mirroring,
                &[Preparing, Paused, Failed, EpochFencing, UleRecovery],
            ),
            (Pausing, &[Mirroring]),
            (Paused, &[Pausing]),
            (
                Stopping,
                &[
                    Preparing,
                    Mirroring,
                    Pausing,
                    Paused,
                    Failed,
                    Unknown,
                    EpochFencing,
                    UleRecovery,
                ],
            ),
            (Stopped, &[Stopping]),
            (Failed, &ALL_STATES),
            (Unknown, &[]),
        ];
        for (target, sources) in valid {
            for from in ALL_STATES {
                let expected = from == *target || sources.contains(&from);
                assert_eq!(
                    from.can_transition_to(*target),
                    expected,
                    "{from} -> {target}"
                );
            }
        }
    }

    #[test]
    fn only_stopped_is_writable() {
        for s in ALL_STATES {
            assert_eq!(s.is_read_only(), s != Stopped);
        }
    }
}
