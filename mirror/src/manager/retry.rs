//! FAILED and its retries (KIP-1279 §1.6, P2's policy): where a partition goes next from its recorded
//! state, the one backoff rule every retry goes through, and what a failure records. The retry time is
//! recorded in FAILED with the attempt count, so restarts neither retry early nor use up attempts.

use crate::error::Error;
use crate::metadata::DesiredState;
use crate::records::{MirrorKey, PartitionStateValue};
use crate::state::MirrorState;

use super::{MirrorSettings, Work};

/// What a failure records: the attempt (-1: not retried), when it is retried, the message.
pub(super) struct Failure {
    pub(super) attempt: i16,
    pub(super) next_retry_ms: Option<i64>,
    pub(super) message: String,
}

/// The failure after `prior` consecutive failures of the same request: exponential backoff with 20 %
/// jitter; a refusal, or a failure past `failed_retry_max_attempts`, is not retried.
pub(super) fn failure(
    settings: &MirrorSettings,
    key: &MirrorKey,
    prior: i16,
    error: &Error,
    now: i64,
) -> Failure {
    let max = settings.failed_retry_max_attempts;
    let mut message = error.to_string();
    let attempt = if matches!(error, Error::Refused(_)) {
        -1
    } else if prior >= max {
        message = format!("{message} (not retried: mirror.failed.retry.max.attempts is {max})");
        -1
    } else {
        prior + 1
    };
    let next_retry_ms = (attempt > 0).then(|| now + backoff_ms(settings, key, attempt));
    Failure {
        attempt,
        next_retry_ms,
        message,
    }
}

/// The wait before retry `attempt` (1-based): doubling from the initial backoff up to the maximum,
/// with a deterministic 20 % jitter.
pub(super) fn backoff_ms(settings: &MirrorSettings, key: &MirrorKey, attempt: i16) -> i64 {
    let base = settings
        .failed_retry_initial_backoff_ms
        .saturating_mul(1i64 << (attempt - 1).clamp(0, 30))
        .min(settings.failed_retry_max_backoff_ms);
    let jitter = jitter_fraction(key, attempt);
    ((base as f64 * (1.0 + 0.2 * jitter)) as i64).max(1)
}

/// What the desired state asks of a partition in `current` (§1.3); `None`: nothing now.
pub(super) fn target_state(
    w: &Work,
    current: MirrorState,
    now: i64,
    settings: &MirrorSettings,
) -> Option<MirrorState> {
    use MirrorState::*;
    Some(match (w.desired, current) {
        (DesiredState::Stop, Stopped) => Stopped,
        (_, Failed) => {
            let (f, _) = w.stored.as_ref().expect("a recorded FAILED state");
            return retry_target(w.desired, f, now, settings);
        }
        (DesiredState::Stop, _) => Stopping,
        (_, Stopping) => Stopping,
        (_, Pausing) => Pausing,
        (_, Unknown | Stopped) => Preparing,
        (DesiredState::Start, Paused) => Mirroring,
        (DesiredState::Pause, Mirroring) => Pausing,
        (DesiredState::Pause, Paused) => Paused,
        (_, s) => s,
    })
}

/// Where a FAILED partition goes, if anywhere yet. A stop asked for after the failure is a new request
/// and starts at once; every retry of a failed action (the stop's own included) waits for its recorded
/// time, none happens while paused (a paused topic does not talk to its source) or when the failure
/// was marked non-retryable (`resume` and `retry` reset those).
fn retry_target(
    desired: DesiredState,
    f: &PartitionStateValue,
    now: i64,
    settings: &MirrorSettings,
) -> Option<MirrorState> {
    use MirrorState::*;
    if desired == DesiredState::Stop && f.previous != Stopping {
        return Some(Stopping);
    }
    let due = f.next_retry_ms.is_none_or(|t| !waiting(now, t, settings));
    if desired == DesiredState::Pause || f.retry_attempt < 0 || !due {
        return None;
    }
    Some(match (desired, f.previous) {
        (DesiredState::Stop, _) => Stopping,
        // A stop no longer wanted (the topic was added again) mirrors afresh.
        (_, Unknown | Failed | Stopped | Stopping) => Preparing,
        // EPOCH_FENCING and ULE_RECOVERY are entered from MIRRORING only: its next fetch finds again
        // whatever sent the partition there.
        (_, Pausing | Paused | EpochFencing | UleRecovery) => Mirroring,
        (_, other) => other,
    })
}

/// Whether `now` is before `until`, a time set by a backoff. A time further ahead than any backoff
/// (with its jitter) was set before the clock went back: it is not waited for, rather than a wait of
/// unknown length.
pub(super) fn waiting(now: i64, until: i64, settings: &MirrorSettings) -> bool {
    let longest = settings
        .failed_retry_max_backoff_ms
        .max(settings.fetch_backoff_ms)
        .saturating_mul(6)
        / 5
        + 1;
    now < until && until.saturating_sub(now) <= longest
}

/// The earliest time after `now` a partition wants another try: a recorded FAILED retry (kept across
/// restarts; none while paused or not retried) or one of this process's `waits`.
pub(super) fn next_retry_ms(
    work: &[Work],
    waits: impl Iterator<Item = i64>,
    now: i64,
) -> Option<i64> {
    let recorded = work
        .iter()
        .filter_map(|w| w.stored.as_ref().map(|(v, _)| (w, v)))
        .filter(|(w, v)| {
            v.state == MirrorState::Failed
                && v.retry_attempt >= 0
                && w.desired != DesiredState::Pause
        })
        .filter_map(|(_, v)| v.next_retry_ms);
    waits.chain(recorded).filter(|t| *t > now).min()
}

/// A deterministic jitter in [-1, 1] for a partition's retry (no clock or RNG: repeatable in tests).
fn jitter_fraction(key: &MirrorKey, attempt: i16) -> f64 {
    let h = crate::records::java_string_hash(&format!("{}:{attempt}", key.coordinator_key()));
    (h as f64) / (i32::MAX as f64)
}
