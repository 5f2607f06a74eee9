//! The mirror partition state machine (KIP-1279 §1.1, §1.2): states, their persisted encoding and the
//! transition table.

use std::fmt;

/// A mirror partition's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MirrorState {
    /// Truncating the local log to the last mirrored epoch the source reports.
    Preparing,
    /// The fetcher copies the source partition.
    Mirroring,
    /// A fetched batch carried an epoch above the local leader epoch: the local epoch is bumped above
    /// the source's (persisted) before mirroring goes on (the reference's EPOCH_FENCING).
    EpochFencing,
    /// The source truncated below our log end while mirroring (an unclean leader election there) and
    /// the mirror allows it (`mirror.support.unclean.leader.election`): converge by Kafka's follower
    /// truncation, then mirror (the reference's ULE_RECOVERY).
    UleRecovery,
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
    MirrorState::Mirroring,
    MirrorState::EpochFencing,
    MirrorState::UleRecovery,
    MirrorState::Pausing,
    MirrorState::Paused,
    MirrorState::Stopping,
    MirrorState::Stopped,
    MirrorState::Failed,
    MirrorState::Unknown,
];

impl MirrorState {
    /// klog's persisted encoding (`MirrorPartitionState` value version 0). It is the seed prototype's
    /// (P1) numbering; a change of numbering must come with a new value version.
    pub fn to_byte(self) -> i8 {
        match self {
            MirrorState::Preparing => 0,
            MirrorState::Mirroring => 1,
            MirrorState::Pausing => 2,
            MirrorState::Paused => 3,
            MirrorState::Stopping => 4,
            MirrorState::Stopped => 5,
            MirrorState::Failed => 6,
            // Not in the seed numbering: past its last value until the value's version carries the
            // reference's numbering.
            MirrorState::EpochFencing => 7,
            MirrorState::UleRecovery => 8,
            MirrorState::Unknown => 16,
        }
    }

    /// Decodes a persisted state; `-1` (P2's UNKNOWN) is read as UNKNOWN too.
    pub fn from_byte(b: i8) -> Option<Self> {
        Some(match b {
            0 => MirrorState::Preparing,
            1 => MirrorState::Mirroring,
            2 => MirrorState::Pausing,
            3 => MirrorState::Paused,
            4 => MirrorState::Stopping,
            5 => MirrorState::Stopped,
            6 => MirrorState::Failed,
            7 => MirrorState::EpochFencing,
            8 => MirrorState::UleRecovery,
            16 | -1 => MirrorState::Unknown,
            _ => return None,
        })
    }

    /// The state's name, as Kafka spells it (`MIRRORING`).
    pub fn name(self) -> &'static str {
        match self {
            MirrorState::Preparing => "PREPARING",
            MirrorState::Mirroring => "MIRRORING",
            MirrorState::EpochFencing => "EPOCH_FENCING",
            MirrorState::UleRecovery => "ULE_RECOVERY",
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

    /// The reference's transition table (MPM `isValidStateTransition`: EPOCH_FENCING and ULE_RECOVERY
    /// only from MIRRORING and back to it, FAILED -> MIRRORING), with one documented extension:
    /// UNKNOWN -> STOPPING (a topic removed from its mirror before any state was recorded would
    /// otherwise stay read-only). A self-transition is always valid: it re-runs the state's actions.
    pub fn can_transition_to(self, target: MirrorState) -> bool {
        use MirrorState::*;
        if self == target {
            return true;
        }
        match target {
            Preparing => matches!(self, Unknown | Stopped | Failed),
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
                    | EpochFencing
                    | UleRecovery
                    | Pausing
                    | Paused
                    | Failed
                    | Unknown
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
            .find(|st| st.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown mirror state {s:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use MirrorState::*;

    #[test]
    fn encoding_round_trips_and_rejects_unknown_bytes() {
        for s in ALL_STATES {
            assert_eq!(MirrorState::from_byte(s.to_byte()), Some(s));
            assert_eq!(s.name().parse::<MirrorState>().unwrap(), s);
        }
        assert_eq!(MirrorState::from_byte(-1), Some(Unknown));
        assert_eq!(MirrorState::from_byte(9), None);
        assert_eq!(MirrorState::from_byte(100), None);
    }

    #[test]
    fn transition_table_matches_the_spec() {
        let valid: &[(MirrorState, &[MirrorState])] = &[
            (Preparing, &[Unknown, Stopped, Failed]),
            (
                Mirroring,
                &[Preparing, Paused, Failed, EpochFencing, UleRecovery],
            ),
            (EpochFencing, &[Mirroring]),
            (UleRecovery, &[Mirroring]),
            (Pausing, &[Mirroring]),
            (Paused, &[Pausing]),
            (
                Stopping,
                &[
                    Preparing,
                    Mirroring,
                    EpochFencing,
                    UleRecovery,
                    Pausing,
                    Paused,
                    Failed,
                    Unknown,
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
