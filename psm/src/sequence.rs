//! Kafka's sequence arithmetic (`DefaultRecordBatch.incrementSequence`/`decrementSequence`): sequence
//! numbers are non-negative `i32`s that wrap from `i32::MAX` back to 0.
//!
//! Java's `int` arithmetic wraps silently; the wrapping operations here reproduce it exactly, for any
//! input, so a hostile batch can never make us panic.

/// No sequence (`RecordBatch.NO_SEQUENCE`).
pub const NO_SEQUENCE: i32 = -1;

/// `sequence + increment`, wrapping past `i32::MAX` to 0 (`DefaultRecordBatch.incrementSequence`).
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX.wrapping_sub(increment) {
        increment
            .wrapping_sub(i32::MAX.wrapping_sub(sequence))
            .wrapping_sub(1)
    } else {
        sequence.wrapping_add(increment)
    }
}

/// `sequence - decrement`, wrapping below 0 to `i32::MAX` (`DefaultRecordBatch.decrementSequence`).
#[inline]
pub fn decrement_sequence(sequence: i32, decrement: i32) -> i32 {
    if sequence < decrement {
        i32::MAX
            .wrapping_sub(decrement.wrapping_sub(sequence))
            .wrapping_add(1)
    } else {
        sequence.wrapping_sub(decrement)
    }
}

/// Whether `next_seq` directly follows `last_seq` (`ProducerAppendInfo.inSequence`): `last + 1`, computed
/// without overflow, or 0 after `i32::MAX`.
pub(crate) fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    i64::from(next_seq) == i64::from(last_seq) + 1 || (next_seq == 0 && last_seq == i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn increment_wraps_past_int_max_to_zero() {
        assert_eq!(increment_sequence(5, 3), 8);
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
    }

    #[test]
    fn decrement_wraps_below_zero_to_int_max() {
        assert_eq!(decrement_sequence(8, 3), 5);
        assert_eq!(decrement_sequence(0, 1), i32::MAX);
        assert_eq!(decrement_sequence(1, 3), i32::MAX - 1);
        // Java's quirk: -1 < 0, so "no sequence" minus nothing wraps to i32::MAX.
        assert_eq!(decrement_sequence(NO_SEQUENCE, 0), i32::MAX);
    }

    #[test]
    fn in_sequence_accepts_successor_and_wrap_only() {
        assert!(in_sequence(NO_SEQUENCE, 0));
        assert!(in_sequence(4, 5));
        assert!(in_sequence(i32::MAX, 0));
        assert!(!in_sequence(4, 6));
        assert!(!in_sequence(4, 4));
        assert!(!in_sequence(i32::MAX, i32::MIN));
    }

    #[test]
    fn extreme_inputs_do_not_panic() {
        for &a in &[i32::MIN, -1, 0, 1, i32::MAX] {
            for &b in &[i32::MIN, -1, 0, 1, i32::MAX] {
                let _ = increment_sequence(a, b);
                let _ = decrement_sequence(a, b);
                let _ = in_sequence(a, b);
            }
        }
    }
}
