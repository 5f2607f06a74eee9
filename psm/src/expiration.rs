//! Producer id expiration (`ProducerStateManager.isProducerExpired`): a producer without an open
//! transaction expires when `now - lastTimestamp >= producer.id.expiration.ms`.
//!
//! Java computes `now - lastTimestamp` in wrapping 64-bit arithmetic, so a timestamp far in the past or
//! future can wrap. To expire in time proportional to what expires, the manager keeps producers ordered by
//! last timestamp and asks here which timestamps are expired: the Java predicate holds exactly on at most
//! three contiguous ranges of timestamps, one per way the subtraction can wrap.

const TWO_POW_63: i128 = 1 << 63;
const TWO_POW_64: i128 = 1 << 64;

/// Kafka's predicate for the last timestamp of a producer without an open transaction.
pub(crate) fn is_expired(now_ms: i64, last_timestamp: i64, expiration_ms: i64) -> bool {
    now_ms.wrapping_sub(last_timestamp) >= expiration_ms
}

/// The inclusive ranges of last timestamps `t` with `is_expired(now_ms, t, expiration_ms)`.
///
/// With `d = now - t` computed exactly, Java sees `d - 2^64` when `d >= 2^63` (`t <= now - 2^63`), `d`
/// when `d` fits, and `d + 2^64` when `d < -2^63` (`t > now + 2^63`); each case is a bound on `t`.
pub(crate) fn expired_timestamp_ranges(
    now_ms: i64,
    expiration_ms: i64,
) -> impl Iterator<Item = (i64, i64)> {
    let now = i128::from(now_ms);
    let expiration = i128::from(expiration_ms);
    let ranges = [
        (
            i128::from(i64::MIN),
            (now - TWO_POW_63).min(now - TWO_POW_64 - expiration),
        ),
        (
            now - TWO_POW_63 + 1,
            (now + TWO_POW_63).min(now - expiration),
        ),
        (now + TWO_POW_63 + 1, now + TWO_POW_64 - expiration),
    ];
    ranges.into_iter().filter_map(clamp_to_i64)
}

fn clamp_to_i64((low, high): (i128, i128)) -> Option<(i64, i64)> {
    let low = i64::try_from(low.max(i128::from(i64::MIN))).ok()?;
    let high = i64::try_from(high.min(i128::from(i64::MAX))).ok()?;
    (low <= high).then_some((low, high))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn in_ranges(now: i64, t: i64, expiration: i64) -> bool {
        expired_timestamp_ranges(now, expiration).any(|(low, high)| low <= t && t <= high)
    }

    #[test]
    fn ordinary_values_expire_at_the_boundary() {
        assert!(is_expired(86_400_000, 0, 86_400_000));
        assert!(!is_expired(86_399_999, 0, 86_400_000));
        assert!(in_ranges(86_400_000, 0, 86_400_000));
        assert!(!in_ranges(86_399_999, 0, 86_400_000));
    }

    #[test]
    fn a_wrapping_subtraction_is_not_expired_as_in_java() {
        // now - i64::MIN wraps to a negative number in Java: such a producer never expires.
        assert!(!is_expired(1_700_000_000_000, i64::MIN, 86_400_000));
        assert!(!in_ranges(1_700_000_000_000, i64::MIN, 86_400_000));
        // -2 - i64::MAX wraps to i64::MAX: expired.
        assert!(is_expired(-2, i64::MAX, 86_400_000));
        assert!(in_ranges(-2, i64::MAX, 86_400_000));
    }

    fn interesting() -> impl Strategy<Value = i64> {
        prop_oneof![
            any::<i64>(),
            -3i64..3,
            (i64::MAX - 3)..=i64::MAX,
            i64::MIN..(i64::MIN + 3),
            0i64..200_000_000,
        ]
    }

    proptest! {
        #[test]
        fn ranges_are_exactly_the_java_predicate(
            now in interesting(), t in interesting(), expiration in interesting()
        ) {
            prop_assert_eq!(in_ranges(now, t, expiration), is_expired(now, t, expiration));
        }
    }
}
