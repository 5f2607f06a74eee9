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
#[derive(Debug, Clone, Copy)]
pub(super) struct RecordLayout {
    /// The record's size, its length varint included (below 8 KiB + 2: the length has two bytes at most).
    size: u16,
    /// The length varint's bytes (little-endian window, masked to its width).
    length: u16,
    length_mask: u16,
    /// The timestamp delta's offset, and the mask of its width (0xff or 0xffff).
    timestamp_at: u16,
    timestamp_mask: u16,
    /// The offset delta's offset, and whether it has two bytes.
    offset_at: u16,
    offset_two: bool,
    /// The key length's offset and bytes.
    key_at: u16,
    key: u16,
    key_mask: u16,
    /// The value length's offset and bytes.
    value_at: u16,
    value: u16,
    value_mask: u16,
}

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

impl RecordLayout {
    /// The layout of `record` (exactly one record, which the full walk accepted), if its varints all
    /// have one or two bytes and it has no headers.
    #[inline(never)]
    pub(super) fn learn(record: &[u8]) -> Option<RecordLayout> {
        if record.last() != Some(&0) || record.len() > u16::MAX as usize {
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
        (end + 1 == record.len()).then_some(RecordLayout {
            size: record.len() as u16,
            length,
            length_mask,
            timestamp_at,
            timestamp_mask,
            offset_at,
            offset_two: offset_mask == 0xffff,
            key_at,
            key,
            key_mask,
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
        let same = |at: u16, bytes: u16, mask: u16| Some(window(record, at)? & mask == bytes);
        if !(same(0, self.length, self.length_mask)?
            && same(self.key_at, self.key, self.key_mask)?
            && same(self.value_at, self.value, self.value_mask)?
            && record[end - position - 1] == 0)
        {
            return None;
        }
        // The timestamp delta: the continuation bits of a varint of the layout's width (0x80 on each
        // byte but the last).
        let timestamp = window(record, self.timestamp_at)? & self.timestamp_mask;
        if timestamp & 0x8080 != (self.timestamp_mask >> 8) & 0x80 {
            return None;
        }
        // The offset delta as its zigzag varint bytes: the index doubled, in the layout's width.
        let z = index.checked_mul(2)?;
        let expected = match (self.offset_two, z) {
            (false, 0..0x80) => z,
            (true, 0x80..0x4000) => (z & 0x7f) | 0x80 | (z >> 7) << 8,
            _ => return None,
        };
        let mask = if self.offset_two { 0xffff } else { 0xff };
        (window(record, self.offset_at)? & mask == expected as u16)
            .then_some((end, zigzag(timestamp)))
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
