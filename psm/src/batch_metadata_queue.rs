//! The last five batches of a producer (Kafka's `batchMetadata` deque, `NUM_BATCHES_TO_RETAIN = 5`)
//! together with the producer's `lastTimestamp`, stored in 56 bytes instead of five 24-byte entries and
//! a timestamp.
//!
//! The newest batch's offsets and sequence are kept whole: sequence checks and snapshots read only them.
//! Its timestamp is almost always `lastTimestamp` (a data batch sets both); only a later marker moves
//! `lastTimestamp` away from it, and then the difference is stored as a varint. Each older batch is
//! encoded against its newer neighbour as unsigned LEB128 varints, newest first:
//!
//! | varint | value (wrapping, so every input is representable) |
//! |---|---|
//! | offset gap | `newer.first_offset - 1 - older.last_offset` (as u64) |
//! | time gap | `newer.timestamp - older.timestamp` (as u64) |
//! | delta and flag | `older.offset_delta` (as u32) `<< 1`, low bit set if a sequence gap follows |
//! | sequence gap | only if flagged: `newer.first_seq - 1 - older.last_seq` (as u32, not 0) |
//!
//! A producer with consecutive sequences needs 3 to 7 bytes per older batch (offset and time gaps below
//! 2^21), so four of them fit the 29 packed bytes. When they do not, the older batches move to a boxed
//! array ("spilled") until the queue is cleared. Both forms hold exactly the same values; only memory
//! differs.

use crate::batch_metadata::BatchMetadata;

/// How many batches a producer's entry remembers (`ProducerStateEntry.NUM_BATCHES_TO_RETAIN`).
pub const NUM_BATCHES_TO_RETAIN: usize = 5;

const OLDER_CAPACITY: usize = NUM_BATCHES_TO_RETAIN - 1;
const PACKED_CAPACITY: usize = 29;
/// Two u64 varints (10 bytes each), a 33-bit one and a u32 one (5 bytes each).
const MAX_RECORD_BYTES: usize = 30;
const MAX_VARINT_BYTES: usize = 10;
/// Set in `len` when the packed bytes start with the newest batch's timestamp gap.
const TIMESTAMP_GAP_FLAG: u8 = 0x80;

const _: () = assert!(core::mem::size_of::<BatchMetadataQueue>() == 56);

/// Up to [`NUM_BATCHES_TO_RETAIN`] batches and the last timestamp; pushing a sixth batch forgets the
/// oldest.
#[derive(Clone, Debug)]
pub(crate) struct BatchMetadataQueue {
    last_timestamp: i64,
    newest_last_offset: i64,
    newest_last_seq: i32,
    newest_offset_delta: i32,
    older: Older,
}

/// `len` counts every batch, the newest included.
#[derive(Clone, Debug)]
enum Older {
    /// `bytes[..used]`: the newest batch's timestamp gap (`last_timestamp - timestamp`) if `len` has
    /// `TIMESTAMP_GAP_FLAG`, then the older batches, newest first.
    Packed {
        len: u8,
        used: u8,
        bytes: [u8; PACKED_CAPACITY],
    },
    Spilled {
        len: u8,
        batches: Box<Spilled>,
    },
}

#[derive(Clone, Debug)]
struct Spilled {
    newest_timestamp: i64,
    /// Newest first; `len - 1` of them are valid.
    older: [BatchMetadata; OLDER_CAPACITY],
}

impl BatchMetadataQueue {
    pub(crate) const fn new(last_timestamp: i64) -> Self {
        BatchMetadataQueue {
            last_timestamp,
            newest_last_offset: 0,
            newest_last_seq: 0,
            newest_offset_delta: 0,
            older: Older::Packed {
                len: 0,
                used: 0,
                bytes: [0; PACKED_CAPACITY],
            },
        }
    }

    pub(crate) fn len(&self) -> usize {
        match &self.older {
            Older::Packed { len, .. } => usize::from(len & !TIMESTAMP_GAP_FLAG),
            Older::Spilled { len, .. } => usize::from(*len),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets the batches; the last timestamp stays (`batchMetadata.clear()`).
    pub(crate) fn clear(&mut self) {
        *self = Self::new(self.last_timestamp);
    }

    pub(crate) fn last_timestamp(&self) -> i64 {
        self.last_timestamp
    }

    /// Moves the last timestamp (a marker's), keeping the newest batch's own timestamp.
    pub(crate) fn set_last_timestamp(&mut self, last_timestamp: i64) {
        if last_timestamp == self.last_timestamp {
            return;
        }
        if self.is_empty() || self.is_spilled() {
            self.last_timestamp = last_timestamp;
            return;
        }
        let newest_timestamp = self.newest_timestamp();
        let (records, records_len) = self.packed_records();
        let gap = last_timestamp.wrapping_sub(newest_timestamp);
        let mut prefix = [0u8; MAX_VARINT_BYTES];
        let mut prefix_len = 0;
        if gap != 0 {
            write_varint(gap as u64, &mut prefix, &mut prefix_len);
        }
        if prefix_len + records_len > PACKED_CAPACITY {
            self.spill();
            self.last_timestamp = last_timestamp;
            return;
        }
        let len = self.len();
        let Older::Packed {
            len: packed_len,
            used,
            bytes,
        } = &mut self.older
        else {
            unreachable!("checked above");
        };
        bytes.copy_within(records..records + records_len, prefix_len);
        bytes[..prefix_len].copy_from_slice(&prefix[..prefix_len]);
        *used = to_u8(prefix_len + records_len);
        *packed_len = to_u8(len) | if gap != 0 { TIMESTAMP_GAP_FLAG } else { 0 };
        self.last_timestamp = last_timestamp;
    }

    /// The newest batch (Kafka's `batchMetadata.getLast()`).
    pub(crate) fn last(&self) -> Option<BatchMetadata> {
        (!self.is_empty()).then(|| self.newest())
    }

    /// The oldest batch (Kafka's `batchMetadata.getFirst()`).
    pub(crate) fn first(&self) -> Option<BatchMetadata> {
        self.newest_first().last()
    }

    pub(crate) fn newest_first(&self) -> NewestFirst<'_> {
        NewestFirst {
            queue: self,
            index: 0,
            newer: BatchMetadata::default(),
            position: self.packed_records().0,
        }
    }

    /// Whether the older batches left the inline bytes (for tests and memory accounting).
    pub(crate) fn is_spilled(&self) -> bool {
        matches!(self.older, Older::Spilled { .. })
    }

    /// Appends `batch` as the newest, forgetting the oldest when five are already held; the last
    /// timestamp becomes the batch's (`addBatch`).
    pub(crate) fn push(&mut self, batch: BatchMetadata) {
        let len = self.len();
        if len > 0 && !self.push_displaced_packed(&batch) {
            self.spill();
            self.push_displaced_spilled(&batch);
        }
        self.newest_last_offset = batch.last_offset;
        self.newest_last_seq = batch.last_seq;
        self.newest_offset_delta = batch.offset_delta;
        self.last_timestamp = batch.timestamp;
        let new_len = to_u8((len + 1).min(NUM_BATCHES_TO_RETAIN));
        match &mut self.older {
            Older::Packed { len, .. } | Older::Spilled { len, .. } => *len = new_len,
        }
    }

    fn newest(&self) -> BatchMetadata {
        BatchMetadata {
            last_seq: self.newest_last_seq,
            last_offset: self.newest_last_offset,
            offset_delta: self.newest_offset_delta,
            timestamp: self.newest_timestamp(),
        }
    }

    fn newest_timestamp(&self) -> i64 {
        match &self.older {
            Older::Spilled { batches, .. } => batches.newest_timestamp,
            Older::Packed { len, bytes, .. } if len & TIMESTAMP_GAP_FLAG != 0 => {
                let gap = read_varint(bytes, &mut 0) as i64;
                self.last_timestamp.wrapping_sub(gap)
            }
            Older::Packed { .. } => self.last_timestamp,
        }
    }

    /// Where the packed older batches start, and how many bytes they take.
    fn packed_records(&self) -> (usize, usize) {
        match &self.older {
            Older::Packed { len, used, bytes } => {
                let mut start = 0;
                if len & TIMESTAMP_GAP_FLAG != 0 {
                    read_varint(bytes, &mut start);
                }
                (start, usize::from(*used) - start)
            }
            Older::Spilled { .. } => (0, 0),
        }
    }

    /// Encodes the current newest batch in front of the packed ones (the new newest has no timestamp
    /// gap); false if it does not fit or the queue is already spilled.
    fn push_displaced_packed(&mut self, newer: &BatchMetadata) -> bool {
        if self.is_spilled() {
            return false;
        }
        let displaced = self.newest();
        let older_count = self.len() - 1;
        let (records, records_len) = self.packed_records();
        let Older::Packed { len, used, bytes } = &mut self.older else {
            unreachable!("checked above");
        };
        let (record, record_len) = encode_wide(&displaced, newer);
        let old = Wide::load(bytes);
        let keep = if older_count == OLDER_CAPACITY {
            skip_records(old, bytes, records, OLDER_CAPACITY - 1)
        } else {
            records_len
        };
        if record_len + keep > PACKED_CAPACITY {
            return false;
        }
        // In registers: the bytes after `used` come out zero, and nothing is written to the stack at a
        // variable offset and read back wider (that stalled store forwarding: a third of `push`).
        record
            .or(old.shr_bytes(records).low_bytes(keep).shl_bytes(record_len))
            .store(bytes);
        *used = to_u8(record_len + keep);
        *len &= !TIMESTAMP_GAP_FLAG;
        true
    }

    fn push_displaced_spilled(&mut self, newer: &BatchMetadata) {
        let displaced = self.newest();
        let Older::Spilled { len, batches } = &mut self.older else {
            unreachable!("spill() was called first");
        };
        let kept = (usize::from(*len) - 1).min(OLDER_CAPACITY - 1);
        batches.older.copy_within(0..kept, 1);
        batches.older[0] = displaced;
        batches.newest_timestamp = newer.timestamp;
    }

    /// Moves the older batches and the newest timestamp out of the packed bytes into a box.
    fn spill(&mut self) {
        if self.is_spilled() {
            return;
        }
        let mut batches = Box::new(Spilled {
            newest_timestamp: self.newest_timestamp(),
            older: [BatchMetadata::default(); OLDER_CAPACITY],
        });
        for (slot, batch) in batches.older.iter_mut().zip(self.newest_first().skip(1)) {
            *slot = batch;
        }
        let len = to_u8(self.len());
        self.older = Older::Spilled { len, batches };
    }
}

fn to_u8(value: usize) -> u8 {
    u8::try_from(value).expect("lengths of the packed queue fit a u8")
}

/// Two queues are equal when they hold the same batches and last timestamp, in whichever form.
impl PartialEq for BatchMetadataQueue {
    fn eq(&self, other: &Self) -> bool {
        self.last_timestamp == other.last_timestamp
            && self.len() == other.len()
            && self.newest_first().eq(other.newest_first())
    }
}

impl Eq for BatchMetadataQueue {}

/// Iterates a queue from the newest batch to the oldest.
pub(crate) struct NewestFirst<'a> {
    queue: &'a BatchMetadataQueue,
    index: usize,
    newer: BatchMetadata,
    position: usize,
}

impl Iterator for NewestFirst<'_> {
    type Item = BatchMetadata;

    fn next(&mut self) -> Option<BatchMetadata> {
        if self.index >= self.queue.len() {
            return None;
        }
        let batch = match (&self.queue.older, self.index) {
            (_, 0) => self.queue.newest(),
            (Older::Packed { bytes, .. }, _) => decode(bytes, &mut self.position, &self.newer),
            (Older::Spilled { batches, .. }, i) => batches.older[i - 1],
        };
        self.index += 1;
        self.newer = batch;
        Some(batch)
    }
}

fn encode(older: &BatchMetadata, newer: &BatchMetadata, out: &mut [u8; MAX_RECORD_BYTES]) -> usize {
    let offset_gap = newer
        .first_offset()
        .wrapping_sub(1)
        .wrapping_sub(older.last_offset);
    let time_gap = newer.timestamp.wrapping_sub(older.timestamp);
    let sequence_gap = newer
        .first_seq()
        .wrapping_sub(1)
        .wrapping_sub(older.last_seq) as u32;
    let delta_and_flag = (u64::from(older.offset_delta as u32) << 1) | u64::from(sequence_gap != 0);
    let mut position = 0;
    write_varint(offset_gap as u64, out, &mut position);
    write_varint(time_gap as u64, out, &mut position);
    write_varint(delta_and_flag, out, &mut position);
    if sequence_gap != 0 {
        write_varint(u64::from(sequence_gap), out, &mut position);
    }
    position
}

fn decode(bytes: &[u8], position: &mut usize, newer: &BatchMetadata) -> BatchMetadata {
    let offset_gap = read_varint(bytes, position) as i64;
    let time_gap = read_varint(bytes, position) as i64;
    let delta_and_flag = read_varint(bytes, position);
    let sequence_gap = if delta_and_flag & 1 == 1 {
        read_varint(bytes, position) as u32 as i32
    } else {
        0
    };
    BatchMetadata {
        last_seq: newer.first_seq().wrapping_sub(1).wrapping_sub(sequence_gap),
        last_offset: newer
            .first_offset()
            .wrapping_sub(1)
            .wrapping_sub(offset_gap),
        offset_delta: (delta_and_flag >> 1) as u32 as i32,
        timestamp: newer.timestamp.wrapping_sub(time_gap),
    }
}

fn write_varint(mut value: u64, out: &mut [u8], position: &mut usize) {
    while value >= 0x80 {
        out[*position] = (value as u8) | 0x80;
        *position += 1;
        value >>= 7;
    }
    out[*position] = value as u8;
    *position += 1;
}

/// Reads bytes this module wrote; running off the end would be our own bug, so indexing may panic.
fn read_varint(bytes: &[u8], position: &mut usize) -> u64 {
    let mut value = 0u64;
    let mut shift = 0;
    loop {
        let byte = bytes[*position];
        *position += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return value;
        }
        shift += 7;
    }
}

/// The byte length of the first `records` packed records from `start`. Varint lengths vary from
/// record to record, so instead of branching on every byte this finds the varints' last bytes (high bit
/// clear) at once and steps over them: three per record, four when the third one's low bit flags a
/// sequence gap.
fn skip_records(wide: Wide, bytes: &[u8; PACKED_CAPACITY], start: usize, records: usize) -> usize {
    let ends = varint_ends(wide);
    let mut position = start;
    for _ in 0..records {
        position = after_varints(ends, position, 2);
        let flagged = usize::from(bytes[position] & 1);
        position = after_varints(ends, position, 1 + flagged);
    }
    position - start
}

/// Bit `i` is set when byte `i` of the packed bytes ends a varint (its high bit is clear).
fn varint_ends(wide: Wide) -> u32 {
    // Bytes 29..32 are past the packed bytes: marked as continuing, so no varint ends there.
    let words = [
        wide.lo as u64,
        (wide.lo >> 64) as u64,
        wide.hi as u64,
        ((wide.hi >> 64) as u64) | 0x8080_8000_0000_0000,
    ];
    let mut continued = 0u32;
    for (k, word) in words.into_iter().enumerate() {
        // The high bit of each byte, gathered into one byte (the bits land on distinct positions, so
        // the multiplication carries nothing between them).
        let high_bits = (word >> 7) & 0x0101_0101_0101_0101;
        continued |= ((high_bits.wrapping_mul(0x0102_0408_1020_4080) >> 56) as u32) << (8 * k);
    }
    !continued
}

/// Up to 32 bytes as a little-endian 256-bit integer (byte `i` at bits `8i..8i + 8`), so the packed
/// bytes are shifted and spliced in registers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Wide {
    lo: u128,
    hi: u128,
}

const _: () = assert!(PACKED_CAPACITY > 16 && PACKED_CAPACITY <= 32);
/// Where the last 16 packed bytes start.
const TOP: usize = PACKED_CAPACITY - 16;

impl Wide {
    /// The packed bytes; bytes 29..32 are zero.
    fn load(bytes: &[u8; PACKED_CAPACITY]) -> Wide {
        let lo = u128::from_le_bytes(bytes[..16].try_into().expect("16 bytes"));
        let top = u128::from_le_bytes(bytes[TOP..].try_into().expect("16 bytes"));
        Wide {
            lo,
            hi: top >> (8 * (16 - TOP)),
        }
    }

    /// Writes bytes 0..29 (the two stores overlap on bytes `TOP..16`, with the same values).
    fn store(self, bytes: &mut [u8; PACKED_CAPACITY]) {
        bytes[..16].copy_from_slice(&self.lo.to_le_bytes());
        let top = self.shr_bytes(TOP).lo;
        bytes[TOP..].copy_from_slice(&top.to_le_bytes());
    }

    fn or(self, other: Wide) -> Wide {
        Wide {
            lo: self.lo | other.lo,
            hi: self.hi | other.hi,
        }
    }

    /// `byte` placed at byte `at` (below 32).
    fn byte_at(byte: u8, at: usize) -> Wide {
        if at < 16 {
            Wide {
                lo: u128::from(byte) << (8 * at),
                hi: 0,
            }
        } else {
            Wide {
                lo: 0,
                hi: u128::from(byte) << (8 * (at - 16)),
            }
        }
    }

    /// Drops the first `n` bytes (`n` up to 32).
    fn shr_bytes(self, n: usize) -> Wide {
        let bits = 8 * n as u32;
        match bits {
            0 => self,
            1..=127 => Wide {
                lo: (self.lo >> bits) | (self.hi << (128 - bits)),
                hi: self.hi >> bits,
            },
            128..=255 => Wide {
                lo: self.hi >> (bits - 128),
                hi: 0,
            },
            _ => Wide::default(),
        }
    }

    /// Moves every byte `n` places up (`n` up to 32); bytes pushed past 32 are lost.
    fn shl_bytes(self, n: usize) -> Wide {
        let bits = 8 * n as u32;
        match bits {
            0 => self,
            1..=127 => Wide {
                lo: self.lo << bits,
                hi: (self.hi << bits) | (self.lo >> (128 - bits)),
            },
            128..=255 => Wide {
                lo: 0,
                hi: self.lo << (bits - 128),
            },
            _ => Wide::default(),
        }
    }

    /// Only the first `n` bytes (`n` up to 32).
    fn low_bytes(self, n: usize) -> Wide {
        let bits = 8 * n as u32;
        match bits {
            0..=127 => Wide {
                lo: self.lo & ((1u128 << bits) - 1),
                hi: 0,
            },
            128..=255 => Wide {
                lo: self.lo,
                hi: self.hi & ((1u128 << (bits - 128)) - 1),
            },
            _ => self,
        }
    }
}

/// [`encode`] into a [`Wide`] (the record is at most `MAX_RECORD_BYTES`, below 32).
fn encode_wide(older: &BatchMetadata, newer: &BatchMetadata) -> (Wide, usize) {
    let mut record = [0u8; MAX_RECORD_BYTES];
    let len = encode(older, newer, &mut record);
    let mut wide = Wide::default();
    for (at, &byte) in record[..len].iter().enumerate() {
        wide = wide.or(Wide::byte_at(byte, at));
    }
    (wide, len)
}

/// The position after the next `count` varints from `position`, given the mask of their last bytes.
fn after_varints(ends: u32, mut position: usize, count: usize) -> usize {
    for _ in 0..count {
        position += (ends >> position).trailing_zeros() as usize + 1;
    }
    position
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    fn batch(last_seq: i32, last_offset: i64, offset_delta: i32, timestamp: i64) -> BatchMetadata {
        BatchMetadata {
            last_seq,
            last_offset,
            offset_delta,
            timestamp,
        }
    }

    fn contents(queue: &BatchMetadataQueue) -> Vec<BatchMetadata> {
        let mut batches: Vec<_> = queue.newest_first().collect();
        batches.reverse();
        batches
    }

    #[test]
    fn keeps_the_last_five_in_order() {
        let mut queue = BatchMetadataQueue::new(-1);
        assert!(queue.is_empty());
        assert_eq!(queue.last(), None);
        for i in 0..7 {
            queue.push(batch(
                i * 10 + 9,
                i64::from(i) * 10 + 9,
                9,
                1000 + i64::from(i),
            ));
        }
        let expected: Vec<_> = (2..7)
            .map(|i| batch(i * 10 + 9, i64::from(i) * 10 + 9, 9, 1000 + i64::from(i)))
            .collect();
        assert_eq!(contents(&queue), expected);
        assert_eq!(queue.first(), Some(expected[0]));
        assert_eq!(queue.last(), Some(expected[4]));
        assert_eq!(queue.last_timestamp(), 1006);
        assert!(!queue.is_spilled(), "consecutive batches stay packed");
    }

    #[test]
    fn a_marker_timestamp_keeps_the_newest_batch_timestamp() {
        let mut queue = BatchMetadataQueue::new(-1);
        queue.push(batch(1, 1, 1, 500));
        queue.push(batch(3, 3, 1, 600));
        queue.set_last_timestamp(900);
        assert_eq!(queue.last_timestamp(), 900);
        assert_eq!(
            contents(&queue),
            vec![batch(1, 1, 1, 500), batch(3, 3, 1, 600)]
        );
        queue.push(batch(5, 5, 1, 700));
        assert_eq!(queue.last_timestamp(), 700);
        assert_eq!(queue.first(), Some(batch(1, 1, 1, 500)));
        queue.clear();
        assert_eq!((queue.len(), queue.last_timestamp()), (0, 700));
    }

    #[test]
    fn wild_values_spill_and_stay_exact() {
        let mut queue = BatchMetadataQueue::new(0);
        let wild = [
            batch(i32::MAX, i64::MAX, i32::MIN, i64::MIN),
            batch(-1, -1, 0, -1),
            batch(i32::MIN, i64::MIN, i32::MAX, i64::MAX),
            batch(0, 0, -5, 0),
            batch(7, 1 << 40, 3, 1 << 50),
            batch(3, 2, 1, 0),
        ];
        let mut model = VecDeque::new();
        for b in wild {
            queue.push(b);
            model.push_back(b);
            if model.len() > NUM_BATCHES_TO_RETAIN {
                model.pop_front();
            }
            assert_eq!(contents(&queue), Vec::from(model.clone()));
        }
        assert!(queue.is_spilled());
        queue.set_last_timestamp(i64::MIN);
        assert_eq!(contents(&queue), Vec::from(model));
        queue.clear();
        assert!(queue.is_empty() && !queue.is_spilled());
    }

    #[derive(Debug, Clone)]
    enum Step {
        Push {
            seq_gap: i32,
            offset_gap: i64,
            records: i32,
            time_gap: i64,
        },
        Wild(i32, i64, i32, i64),
        LastTimestamp(i64),
        Clear,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            8 => (0..3i32, 1..400_000i64, 0..50i32, -5..200_000i64).prop_map(
                |(seq_gap, offset_gap, records, time_gap)| Step::Push { seq_gap, offset_gap, records, time_gap }
            ),
            2 => (any::<i32>(), any::<i64>(), any::<i32>(), any::<i64>())
                .prop_map(|(a, b, c, d)| Step::Wild(a, b, c, d)),
            2 => prop_oneof![any::<i64>(), -1000..100_000i64].prop_map(Step::LastTimestamp),
            1 => Just(Step::Clear),
        ]
    }

    proptest! {
        #[test]
        fn matches_a_vecdeque_of_five_and_a_timestamp(steps in proptest::collection::vec(step(), 0..40)) {
            let mut queue = BatchMetadataQueue::new(-1);
            let mut model: VecDeque<BatchMetadata> = VecDeque::new();
            let mut last_timestamp = -1;
            for step in steps {
                let next = match step {
                    Step::Clear => {
                        queue.clear();
                        model.clear();
                        prop_assert_eq!(queue.last_timestamp(), last_timestamp, "clear keeps the timestamp");
                        continue;
                    }
                    Step::LastTimestamp(ts) => {
                        queue.set_last_timestamp(ts);
                        last_timestamp = ts;
                        prop_assert_eq!(contents(&queue), Vec::from(model.clone()));
                        prop_assert_eq!(queue.last_timestamp(), last_timestamp);
                        continue;
                    }
                    Step::Wild(a, b, c, d) => batch(a, b, c, d),
                    Step::Push { seq_gap, offset_gap, records, time_gap } => {
                        let last = model.back().copied().unwrap_or_default();
                        batch(
                            last.last_seq.wrapping_add(seq_gap).wrapping_add(records),
                            last.last_offset.wrapping_add(offset_gap).wrapping_add(i64::from(records)),
                            records,
                            last.timestamp.wrapping_add(time_gap),
                        )
                    }
                };
                queue.push(next);
                last_timestamp = next.timestamp;
                model.push_back(next);
                if model.len() > NUM_BATCHES_TO_RETAIN {
                    model.pop_front();
                }
                prop_assert_eq!(queue.len(), model.len());
                prop_assert_eq!(queue.last_timestamp(), last_timestamp);
                prop_assert_eq!(contents(&queue), Vec::from(model.clone()));
                prop_assert_eq!(queue.first(), model.front().copied());
                prop_assert_eq!(queue.last(), model.back().copied());
            }
        }
    }
}
