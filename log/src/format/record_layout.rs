//! The byte layout of one record, for the leader's record walk: producers of one schema send batches
//! whose records all have the same size, and such a record differs from the one before it only in its
//! timestamp and offset deltas. Checking a record against its predecessor's layout (a handful of
//! compares) replaces six varint decodes with their bounds checks.
//!
//! Exact, not a heuristic: a record whose length, key-length and value-length bytes are those of a
//! record the full walk accepted, at the same places, whose timestamp delta has the same width, whose
//! offset delta is its index, and whose last byte is a 0 header count, decodes field by field like that
//! record, so the full walk would accept it with the same result.

/// Where the fields of a record sit, relative to its first byte, and the bytes of its lengths. Every
/// varint here has one or two bytes; each is followed by at least one byte of the record, so a two-byte
/// window at any of these offsets lies within it.
///
/// The length, the timestamp delta and the offset delta always lie in the record's first eight bytes
/// (2 + 1 + 2 + 2 at most), and so does the key length unless all four take two bytes: one 8-byte load
/// and one masked compare check them together, where a window per field cost four loads with their
/// bounds checks (issue #28: the walk was 96 instructions a 100-byte record).
#[derive(Debug, Clone, Copy)]
pub(super) struct RecordLayout {
    /// The record's size, its length varint included (below 8 KiB + 2: the length has two bytes at most).
    size: u16,
    /// The bits of the record's first eight bytes (little-endian) that must match: the length's and the
    /// key length's bytes (when they lie there), the continuation bits of the timestamp delta and the
    /// offset delta's bytes.
    prefix_mask: u64,
    /// Their values, but for the offset delta's (the record's index, set per record).
    prefix: u64,
    /// The timestamp delta's shift in the prefix, and the mask of its width (0xff or 0xffff).
    timestamp_shift: u32,
    timestamp_mask: u16,
    /// The offset delta's shift in the prefix, and whether it has two bytes.
    offset_shift: u32,
    offset_two: bool,
    /// The key length's offset and bytes when it lies past the prefix (`key_mask` 0: checked there).
    key_at: u16,
    key: u16,
    key_mask: u16,
    /// The value length's offset and bytes.
    value_at: u16,
    value: u16,
    value_mask: u16,
}

/// The bytes the prefix check reads: the record's first eight.
const PREFIX_BYTES: u16 = 8;

/// Two bytes at `at` of `record`, little-endian (the first byte in the low bits).
#[inline(always)]
fn window(record: &[u8], at: u16) -> Option<u16> {
    let at = at as usize;
    let bytes = record.get(at..at + 2)?;
    Some(u16::from_le_bytes([bytes[0], bytes[1]]))
}

/// A one- or two-byte varint at `at`: (bytes masked to its width, that mask).
#[inline(always)]
fn short_varint(record: &[u8], at: u16) -> Option<(u16, u16)> {
    let w = window(record, at)?;
    if w & 0x80 == 0 {
        return Some((w & 0xff, 0xff));
    }
    (w & 0x8000 == 0).then_some((w, 0xffff))
}

/// A zigzag varint's value from its bytes, masked to its width (one or two bytes: a one-byte varint's
/// high byte is 0).
#[inline(always)]
fn zigzag(bytes: u16) -> i64 {
    let raw = (bytes & 0x7f) as i64 | ((bytes >> 8) as i64) << 7;
    (raw >> 1) ^ -(raw & 1)
}

/// The width of a varint whose bytes were masked by `mask`: 1 or 2.
#[inline(always)]
fn width(mask: u16) -> u16 {
    1 + (mask >> 8 & 1)
}

/// The continuation bits of a varint of the width `mask` says: 0x80 on each byte but the last.
#[inline(always)]
fn continuation(mask: u16) -> u16 {
    (mask >> 8) & 0x80
}

impl RecordLayout {
    /// The layout of `record` (exactly one record, which the full walk accepted), if its varints all
    /// have one or two bytes, it has no headers and it has at least [`PREFIX_BYTES`] bytes.
    #[inline(never)]
    pub(super) fn learn(record: &[u8]) -> Option<RecordLayout> {
        if record.last() != Some(&0)
            || record.len() > u16::MAX as usize
            || record.len() < PREFIX_BYTES as usize
        {
            return None;
        }
        let (length, length_mask) = short_varint(record, 0)?;
        let timestamp_at = width(length_mask) + 1;
        let (_, timestamp_mask) = short_varint(record, timestamp_at)?;
        let offset_at = timestamp_at + width(timestamp_mask);
        let (_, offset_mask) = short_varint(record, offset_at)?;
        let key_at = offset_at + width(offset_mask);
        let (key, key_mask) = short_varint(record, key_at)?;
        let value_at = key_at as usize + width(key_mask) as usize + zigzag(key).max(0) as usize;
        let value_at = u16::try_from(value_at).ok()?;
        let (value, value_mask) = short_varint(record, value_at)?;
        let end = value_at as usize + width(value_mask) as usize + zigzag(value).max(0) as usize;
        // The header count (0) must be the last byte: otherwise the record has headers.
        if end + 1 != record.len() {
            return None;
        }
        let (timestamp_shift, offset_shift) =
            (8 * u32::from(timestamp_at), 8 * u32::from(offset_at));
        let mut prefix_mask = u64::from(length_mask)
            | u64::from(timestamp_mask & 0x8080) << timestamp_shift
            | u64::from(offset_mask) << offset_shift;
        let mut prefix =
            u64::from(length) | u64::from(continuation(timestamp_mask)) << timestamp_shift;
        let key_in_prefix = key_at + width(key_mask) <= PREFIX_BYTES;
        if key_in_prefix {
            prefix_mask |= u64::from(key_mask) << (8 * u32::from(key_at));
            prefix |= u64::from(key) << (8 * u32::from(key_at));
        }
        Some(RecordLayout {
            size: record.len() as u16,
            prefix_mask,
            prefix,
            timestamp_shift,
            timestamp_mask,
            offset_shift,
            offset_two: offset_mask == 0xffff,
            key_at,
            key: if key_in_prefix { 0 } else { key },
            key_mask: if key_in_prefix { 0 } else { key_mask },
            value_at,
            value,
            value_mask,
        })
    }

    /// The record at `position` of `data` if it has this layout and its offset delta is `index`: (its
    /// end, its timestamp delta). `None` says only that the full walk must look at it.
    #[inline(always)]
    pub(super) fn matches(&self, data: &[u8], position: usize, index: u32) -> Option<(usize, i64)> {
        let end = position + self.size as usize;
        let record = data.get(position..end)?;
        let head = u64::from_le_bytes(*record.first_chunk::<{ PREFIX_BYTES as usize }>()?);
        // The offset delta as its zigzag varint bytes: the index doubled, in the layout's width.
        let z = index.checked_mul(2)?;
        let offset = match (self.offset_two, z) {
            (false, 0..0x80) => z,
            (true, 0x80..0x4000) => (z & 0x7f) | 0x80 | (z >> 7) << 8,
            _ => return None,
        };
        if head & self.prefix_mask != self.prefix | u64::from(offset) << self.offset_shift {
            return None;
        }
        let same = |at: u16, bytes: u16, mask: u16| Some(window(record, at)? & mask == bytes);
        if !(same(self.value_at, self.value, self.value_mask)?
            && record.last() == Some(&0)
            && (self.key_mask == 0 || same(self.key_at, self.key, self.key_mask)?))
        {
            return None;
        }
        let timestamp = (head >> self.timestamp_shift) as u16 & self.timestamp_mask;
        Some((end, zigzag(timestamp)))
    }
}

#[cfg(test)]
mod tests {
    use super::RecordLayout;
    use crate::format::{BatchBuilder, Compression, RECORD_BATCH_OVERHEAD};

    /// Records of 100-byte values with 8-byte keys, the bench's shape; the first `n`, `step` ms apart.
    fn payload(n: i64, value_bytes: usize, step: i64) -> Vec<u8> {
        let mut b = BatchBuilder::new(Compression::None);
        for i in 0..n {
            let value = vec![1u8; value_bytes];
            b.append(
                i * step,
                Some(format!("k{i:07}").as_bytes()),
                Some(&value),
                &[],
            )
            .unwrap();
        }
        b.build().unwrap()[RECORD_BATCH_OVERHEAD..].to_vec()
    }

    #[test]
    fn a_record_of_the_same_layout_matches_with_its_timestamp_delta() {
        let data = payload(3, 100, 5);
        // 1 + 1 + 1 + 1 + 8 + 2 + 100 + 1 bytes of body, after a two-byte length.
        let size = 2 + 115;
        let layout = RecordLayout::learn(&data[..size]).expect("learnable");
        assert_eq!(layout.matches(&data, size, 1), Some((2 * size, 5)));
        assert_eq!(layout.matches(&data, 2 * size, 2), Some((3 * size, 10)));
        // Not at its own index: the full walk must note the gap.
        assert_eq!(layout.matches(&data, size, 2), None);
    }

    /// Two-byte length, timestamp delta, offset delta and key length: the key length lies past the
    /// prefix the layout checks in one compare, and is checked on its own.
    #[test]
    fn a_key_length_past_the_first_eight_bytes_is_checked_too() {
        let mut b = BatchBuilder::new(Compression::None);
        for i in 0..70i64 {
            let key = format!("k{i:069}");
            b.append(i * 2, Some(key.as_bytes()), Some(&[1u8; 100]), &[])
                .unwrap();
        }
        let mut data = b.build().unwrap()[RECORD_BATCH_OVERHEAD..].to_vec();
        // Where each record starts, from its length varint.
        let mut starts = vec![0usize];
        while *starts.last().unwrap() < data.len() {
            let p = *starts.last().unwrap();
            let (length, mask) = super::short_varint(&data, p as u16).unwrap();
            starts.push(p + super::width(mask) as usize + super::zigzag(length) as usize);
        }
        assert_eq!(starts.len(), 71);
        let at = |index: usize| starts[index];
        // From record 64 on every varint before the key has two bytes.
        assert_eq!(at(66) - at(65), 2 + 1 + 2 + 2 + 2 + 70 + 2 + 100 + 1);
        let layout = RecordLayout::learn(&data[at(65)..at(66)]).expect("learnable");
        assert_eq!(
            layout.key_mask, 0xffff,
            "the key length lies past the prefix"
        );
        assert_eq!(layout.matches(&data, at(66), 66), Some((at(67), 132)));
        assert_eq!(layout.matches(&data, at(66), 67), None);
        // A key length of 71 in record 67 (zigzag 142: 0x8e 0x01): its value length moves, so it
        // matches no more.
        assert_eq!(data[at(67) + 7..at(67) + 9], [0x8c, 0x01]);
        data[at(67) + 7] = 0x8e;
        assert_eq!(layout.matches(&data, at(67), 67), None);
    }

    #[test]
    fn a_record_under_eight_bytes_has_no_layout() {
        let mut b = BatchBuilder::new(Compression::None);
        b.append(0, None, None, &[]).unwrap();
        let data = b.build().unwrap()[RECORD_BATCH_OVERHEAD..].to_vec();
        assert_eq!(data.len(), 7);
        assert!(RecordLayout::learn(&data).is_none());
    }

    #[test]
    fn a_record_of_another_size_or_with_headers_does_not_match() {
        let mut data = payload(1, 100, 0);
        let size = data.len();
        let layout = RecordLayout::learn(&data).expect("learnable");
        data.extend_from_slice(&payload(1, 99, 0));
        assert_eq!(layout.matches(&data, size, 1), None);
        let mut b = BatchBuilder::new(Compression::None);
        let header = crate::format::Header {
            key: "h",
            value: None,
        };
        b.append(0, Some(b"k"), Some(b"v"), &[header]).unwrap();
        let with_header = b.build().unwrap()[RECORD_BATCH_OVERHEAD..].to_vec();
        assert!(RecordLayout::learn(&with_header).is_none());
    }
}
