//! The last five batches of a producer (Kafka's `batchMetadata` deque, `NUM_BATCHES_TO_RETAIN = 5`)
//! together with the producer's `lastTimestamp`, stored in 56 bytes instead of five 24-byte entries and
//! a timestamp.
//!
//! The newest batch's offsets and sequence are kept whole: sequence checks and snapshots read only them.
//! Its timestamp is almost always `lastTimestamp` (a data batch sets both); only a later marker moves
//! `lastTimestamp` away from it, and then the difference is kept in 19 bits. Each older batch is one
//! fixed-width 7-byte slot (56 bits), encoded against its newer neighbour; the three values share 49
//! bits, each as wide as it needs:
//!
//! | bits | value (wrapping differences) |
//! |---|---|
//! | 0..2 | the width `d` of the offset delta: 4, 8, 16 or 31 bits |
//! | 2..7 | the width `w` of the offset gap, 0 to 31 bits |
//! | 7.. (`d` bits) | `older.offset_delta` (0 to 2^31 - 1) |
//! | next `w` bits | offset gap: `newer.first_offset - 1 - older.last_offset` |
//! | the other `49 - d - w` bits | time gap: `newer.timestamp - older.timestamp` |
//! | — | the sequence is not stored: `older.last_seq` must be `newer.first_seq - 1` |
//!
//! So 15-record batches 2^24 offsets and 2^20 ms apart (a million producers interleaved) still fit
//! (4 + 24 + 21 bits), and so do 1,000-record batches below 2^17 offsets and 2^16 ms apart (16 + 17 +
//! 16).
//!
//! The four slots are a ring: a push encodes only the displaced newest batch into the slot of the
//! oldest, a store of 7 bytes at a fixed place, and nothing else moves. (An earlier form packed the
//! older batches as varints and re-spliced them on every push: ~390 instructions a batch; ~80 now.)
//! A batch that does not fit its slot (a sequence gap, a negative delta or gap, gaps too wide together,
//! a marker's timestamp more than 262 s off) moves the older batches to a boxed array ("spilled") until
//! the queue is cleared. Both forms hold exactly the same values; only memory differs.

use crate::batch_metadata::BatchMetadata;

/// How many batches a producer's entry remembers (`ProducerStateEntry.NUM_BATCHES_TO_RETAIN`).
pub const NUM_BATCHES_TO_RETAIN: usize = 5;

const OLDER_CAPACITY: usize = NUM_BATCHES_TO_RETAIN - 1;
const SLOT_BYTES: usize = 7;
/// The widths an older batch's `offset_delta` may take, chosen by 2 bits of the slot.
const OFFSET_DELTA_WIDTHS: [u32; 4] = [4, 8, 16, 31];
/// The offset gap's width is stored in 5 bits.
const MAX_OFFSET_GAP_WIDTH: u32 = 31;
const HEADER_BITS: u32 = 7;
/// What the three values share: the time gap takes what the other two leave.
const PAYLOAD_BITS: u32 = 8 * SLOT_BYTES as u32 - HEADER_BITS;
/// `shape`: the number of batches (the newest included) in bits 0..3, the ring slot the next displaced
/// batch goes to in bits 3..5, and the top 3 bits of the newest timestamp's 19-bit gap in bits 5..8.
const LEN_MASK: u8 = 0b111;
const HEAD_SHIFT: u32 = 3;
const HEAD_MASK: u8 = 0b11 << HEAD_SHIFT;
const GAP_HIGH_SHIFT: u32 = 5;
/// `last_timestamp - newest.timestamp` is kept in 19 bits, two's complement: about ±262 s.
const TIMESTAMP_GAP_BITS: u32 = 19;

const _: () = assert!(core::mem::size_of::<BatchMetadataQueue>() == 56);
const _: () = assert!(core::mem::offset_of!(BatchMetadataQueue, older) == 24);
/// The last byte of the slots, which [`BatchMetadataQueue::touch`] reads.
const LAST_SLOT_BYTE: usize = OLDER_CAPACITY * SLOT_BYTES - 1;
const _: () = assert!(OLDER_CAPACITY == 4 && NUM_BATCHES_TO_RETAIN <= LEN_MASK as usize);

/// Up to [`NUM_BATCHES_TO_RETAIN`] batches and the last timestamp; pushing a sixth batch forgets the
/// oldest. `repr(C)` (and `repr(u8)` for [`Older`]) fixes the slots at the end, where
/// [`touch`](Self::touch) reads them: an entry's prefetch must load both cache lines it spans.
#[derive(Clone, Debug)]
#[repr(C)]
pub(crate) struct BatchMetadataQueue {
    last_timestamp: i64,
    newest_last_offset: i64,
    newest_last_seq: i32,
    newest_offset_delta: i32,
    older: Older,
}

/// `repr(u8)`: each variant is laid out as a `repr(C)` struct behind the tag, so the slots are the
/// queue's last 28 bytes.
#[derive(Clone, Debug)]
#[repr(u8)]
enum Older {
    /// The older batches in a ring of fixed-width slots (newest first from `head - 1` backwards).
    Slots {
        shape: u8,
        /// The low 16 bits of `last_timestamp - newest.timestamp` (the top 3 are in `shape`).
        gap_low: u16,
        slots: [u8; OLDER_CAPACITY * SLOT_BYTES],
    },
    /// `len` counts every batch, the newest included.
    Spilled { len: u8, batches: Box<Spilled> },
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
            older: Older::Slots {
                shape: 0,
                gap_low: 0,
                slots: [0; OLDER_CAPACITY * SLOT_BYTES],
            },
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        match &self.older {
            Older::Slots { shape, .. } => usize::from(shape & LEN_MASK),
            Older::Spilled { len, .. } => usize::from(*len),
        }
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads the queue's first field and its last byte (the end of the slots, or a spilled queue's
    /// length), so that a prefetch of the entry loads every cache line the queue lies in; the value
    /// means nothing.
    #[inline]
    pub(crate) fn touch(&self) -> u64 {
        let tail = match &self.older {
            Older::Slots { slots, .. } => slots[LAST_SLOT_BYTE],
            Older::Spilled { len, .. } => *len,
        };
        (self.last_timestamp as u64) ^ u64::from(tail)
    }

    /// Forgets the batches; the last timestamp stays (`batchMetadata.clear()`).
    pub(crate) fn clear(&mut self) {
        *self = Self::new(self.last_timestamp);
    }

    #[inline]
    pub(crate) fn last_timestamp(&self) -> i64 {
        self.last_timestamp
    }

    /// Moves the last timestamp (a marker's), keeping the newest batch's own timestamp.
    pub(crate) fn set_last_timestamp(&mut self, last_timestamp: i64) {
        if last_timestamp == self.last_timestamp {
            return;
        }
        if !self.is_empty() {
            let gap = last_timestamp.wrapping_sub(self.newest_timestamp());
            let fits =
                gap >> (TIMESTAMP_GAP_BITS - 1) == 0 || gap >> (TIMESTAMP_GAP_BITS - 1) == -1;
            match &mut self.older {
                Older::Slots { shape, gap_low, .. } if fits => {
                    let raw = (gap as u32) & ((1 << TIMESTAMP_GAP_BITS) - 1);
                    *gap_low = raw as u16;
                    *shape =
                        (*shape & (LEN_MASK | HEAD_MASK)) | ((raw >> 16) as u8) << GAP_HIGH_SHIFT;
                }
                Older::Slots { .. } => self.spill(),
                Older::Spilled { .. } => {}
            }
        }
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
        }
    }

    /// Whether the older batches left the inline slots (for tests and memory accounting).
    pub(crate) fn is_spilled(&self) -> bool {
        matches!(self.older, Older::Spilled { .. })
    }

    /// Appends `batch` as the newest, forgetting the oldest when five are already held; the last
    /// timestamp becomes the batch's (`addBatch`).
    #[inline]
    pub(crate) fn push(&mut self, batch: BatchMetadata) {
        let len = self.len();
        if len > 0 {
            self.push_displaced(&batch);
        }
        self.newest_last_offset = batch.last_offset;
        self.newest_last_seq = batch.last_seq;
        self.newest_offset_delta = batch.offset_delta;
        self.last_timestamp = batch.timestamp;
        let new_len = (len + 1).min(NUM_BATCHES_TO_RETAIN) as u8;
        match &mut self.older {
            Older::Slots { shape, gap_low, .. } => {
                *shape = (*shape & HEAD_MASK) | new_len;
                *gap_low = 0;
            }
            Older::Spilled { len, batches } => {
                *len = new_len;
                batches.newest_timestamp = batch.timestamp;
            }
        }
    }

    /// Moves the current newest batch into the older ones, in front of `newer`: into the ring slot
    /// of the oldest if it fits one, else spilled.
    #[inline]
    fn push_displaced(&mut self, newer: &BatchMetadata) {
        let displaced = self.newest();
        if let Older::Slots { shape, slots, .. } = &mut self.older {
            if let Some(slot) = encode(&displaced, newer) {
                let head = usize::from((*shape & HEAD_MASK) >> HEAD_SHIFT);
                write_slot(slots, head, slot);
                let next_head = ((head + 1) % OLDER_CAPACITY) as u8;
                *shape = (*shape & !HEAD_MASK) | (next_head << HEAD_SHIFT);
                return;
            }
            self.spill();
        }
        let Older::Spilled { len, batches } = &mut self.older else {
            unreachable!("spill() leaves the queue spilled");
        };
        let kept = (usize::from(*len) - 1).min(OLDER_CAPACITY - 1);
        batches.older.copy_within(0..kept, 1);
        batches.older[0] = displaced;
    }

    #[inline]
    fn newest(&self) -> BatchMetadata {
        BatchMetadata {
            last_seq: self.newest_last_seq,
            last_offset: self.newest_last_offset,
            offset_delta: self.newest_offset_delta,
            timestamp: self.newest_timestamp(),
        }
    }

    #[inline]
    fn newest_timestamp(&self) -> i64 {
        match &self.older {
            Older::Slots { shape, gap_low, .. } => {
                let raw = (u32::from(shape >> GAP_HIGH_SHIFT) << 16) | u32::from(*gap_low);
                let unused = 32 - TIMESTAMP_GAP_BITS;
                let gap = ((raw << unused) as i32) >> unused;
                self.last_timestamp.wrapping_sub(i64::from(gap))
            }
            Older::Spilled { batches, .. } => batches.newest_timestamp,
        }
    }

    /// The `index`-th older batch (0: the newest of them), decoded against `newer`, its newer
    /// neighbour. Only for the slot form.
    fn older_slot(&self, index: usize, newer: &BatchMetadata) -> BatchMetadata {
        let Older::Slots { shape, slots, .. } = &self.older else {
            unreachable!("only called on the slot form");
        };
        let head = usize::from((*shape & HEAD_MASK) >> HEAD_SHIFT);
        let at = (head + OLDER_CAPACITY - 1 - index) % OLDER_CAPACITY;
        decode(read_slot(slots, at), newer)
    }

    /// Moves the older batches and the newest timestamp out of the slots into a box.
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
        let len = self.len() as u8;
        self.older = Older::Spilled { len, batches };
    }
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
}

impl Iterator for NewestFirst<'_> {
    type Item = BatchMetadata;

    fn next(&mut self) -> Option<BatchMetadata> {
        if self.index >= self.queue.len() {
            return None;
        }
        let batch = match (&self.queue.older, self.index) {
            (_, 0) => self.queue.newest(),
            (Older::Slots { .. }, i) => self.queue.older_slot(i - 1, &self.newer),
            (Older::Spilled { batches, .. }, i) => batches.older[i - 1],
        };
        self.index += 1;
        self.newer = batch;
        Some(batch)
    }
}

/// `older` as a slot against its newer neighbour, if it fits (see the module documentation).
#[inline]
fn encode(older: &BatchMetadata, newer: &BatchMetadata) -> Option<u64> {
    if older.last_seq != newer.first_seq().wrapping_sub(1) {
        return None;
    }
    let offset_gap = newer
        .first_offset()
        .wrapping_sub(1)
        .wrapping_sub(older.last_offset) as u64;
    let time_gap = newer.timestamp.wrapping_sub(older.timestamp) as u64;
    let offset_delta = u64::from(older.offset_delta as u32);
    let delta_class = OFFSET_DELTA_WIDTHS
        .iter()
        .position(|&width| bit_width(offset_delta) <= width)?;
    let delta_width = OFFSET_DELTA_WIDTHS[delta_class];
    let offset_width = bit_width(offset_gap);
    if offset_width > MAX_OFFSET_GAP_WIDTH {
        return None;
    }
    let time_width = PAYLOAD_BITS.checked_sub(delta_width + offset_width)?;
    if bit_width(time_gap) > time_width {
        return None;
    }
    let payload =
        offset_delta | (offset_gap << delta_width) | (time_gap << (delta_width + offset_width));
    Some(delta_class as u64 | (u64::from(offset_width) << 2) | (payload << HEADER_BITS))
}

fn decode(slot: u64, newer: &BatchMetadata) -> BatchMetadata {
    let delta_width = OFFSET_DELTA_WIDTHS[(slot & 0b11) as usize];
    let offset_width = ((slot >> 2) & 0b1_1111) as u32;
    let payload = slot >> HEADER_BITS;
    let offset_delta = (payload & low_bits(delta_width)) as i32;
    let offset_gap = ((payload >> delta_width) & low_bits(offset_width)) as i64;
    let time_gap = (payload >> (delta_width + offset_width)) as i64;
    BatchMetadata {
        last_seq: newer.first_seq().wrapping_sub(1),
        last_offset: newer
            .first_offset()
            .wrapping_sub(1)
            .wrapping_sub(offset_gap),
        offset_delta,
        timestamp: newer.timestamp.wrapping_sub(time_gap),
    }
}

/// How many bits `value` needs (0 for 0).
fn bit_width(value: u64) -> u32 {
    u64::BITS - value.leading_zeros()
}

/// A mask of the `width` low bits (`width` below 64).
fn low_bits(width: u32) -> u64 {
    (1 << width) - 1
}

#[inline]
fn write_slot(slots: &mut [u8; OLDER_CAPACITY * SLOT_BYTES], at: usize, slot: u64) {
    slots[at * SLOT_BYTES..][..SLOT_BYTES].copy_from_slice(&slot.to_le_bytes()[..SLOT_BYTES]);
}

fn read_slot(slots: &[u8; OLDER_CAPACITY * SLOT_BYTES], at: usize) -> u64 {
    let mut bytes = [0u8; 8];
    bytes[..SLOT_BYTES].copy_from_slice(&slots[at * SLOT_BYTES..][..SLOT_BYTES]);
    u64::from_le_bytes(bytes)
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

    /// `touch` must read the queue's last byte: an entry's prefetch relies on it to load the entry's
    /// second cache line (see `ProducerStateEntry::touch`).
    #[test]
    fn touch_reads_the_last_byte_of_the_queue() {
        let queue = BatchMetadataQueue::new(7);
        let Older::Slots { slots, .. } = &queue.older else {
            panic!("a new queue keeps its slots inline");
        };
        let start = std::ptr::from_ref(&queue) as usize;
        let last = std::ptr::from_ref(&slots[LAST_SLOT_BYTE]) as usize;
        assert_eq!(last - start, core::mem::size_of::<BatchMetadataQueue>() - 1);
        assert_eq!(queue.touch(), 7);
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
        assert!(!queue.is_spilled(), "consecutive batches stay in the slots");
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

    /// Pushes `older`, then `newer`, then three more consecutive batches (so the ring wraps);
    /// returns whether the queue spilled, after checking it holds exactly what was pushed.
    fn spills_after(older: BatchMetadata, newer: BatchMetadata, last_timestamp: i64) -> bool {
        let mut queue = BatchMetadataQueue::new(-1);
        let mut model = VecDeque::from([older, newer]);
        queue.push(older);
        queue.push(newer);
        for _ in 0..4 {
            let last = *model.back().expect("two pushed");
            let next = batch(
                last.last_seq + 3,
                last.last_offset + 3,
                2,
                last.timestamp + 1,
            );
            queue.push(next);
            model.push_back(next);
        }
        while model.len() > NUM_BATCHES_TO_RETAIN {
            model.pop_front();
        }
        queue.set_last_timestamp(last_timestamp);
        assert_eq!(contents(&queue), Vec::from(model));
        assert_eq!(queue.last_timestamp(), last_timestamp);
        queue.is_spilled()
    }

    #[test]
    fn each_slot_field_is_exact_up_to_its_edge_and_spills_past_it() {
        // newer: offsets 100..=109, sequences 50..=59, timestamp 10^12.
        let base = 1_000_000_000_000;
        let newer = batch(59, 109, 9, base);
        // An older batch `offset_gap` offsets and `time_gap` ms before `newer`, consecutive in sequence.
        let older = |offset_delta: i32, offset_gap: i64, time_gap: i64| {
            batch(49, 99 - offset_gap, offset_delta, base - time_gap)
        };
        let cases = [
            ("close", older(3, 0, 7), false),
            ("sequence gap", batch(48, 99, 3, base - 7), true),
            (
                "offset gap of 31 bits",
                older(3, (1 << 31) - 1, (1 << 14) - 1),
                false,
            ),
            (
                "then a time gap of 15 bits",
                older(3, (1 << 31) - 1, 1 << 14),
                true,
            ),
            ("offset gap of 32 bits", older(3, 1 << 31, 0), true),
            ("overlapping offsets", older(3, -1, 0), true),
            ("time gap of 45 bits", older(3, 0, (1 << 45) - 1), false),
            ("time gap of 46 bits", older(3, 0, 1 << 45), true),
            ("timestamp going back", older(3, 0, -1), true),
            (
                "offset delta of 31 bits",
                older(i32::MAX, 0, (1 << 18) - 1),
                false,
            ),
            (
                "then a time gap of 19 bits",
                older(i32::MAX, 0, 1 << 18),
                true,
            ),
            (
                "16 bits, 24 and 9",
                older((1 << 16) - 1, (1 << 24) - 1, (1 << 9) - 1),
                false,
            ),
            (
                "16 bits, 24 and 10",
                older((1 << 16) - 1, (1 << 24) - 1, 1 << 9),
                true,
            ),
            (
                "1,000 records, 17 and 16 bits",
                older(999, (1 << 17) - 1, (1 << 16) - 1),
                false,
            ),
            (
                "a million producers",
                older(14, (1 << 24) - 1, (1 << 21) - 1),
                false,
            ),
            ("negative offset delta", older(-1, 0, 0), true),
        ];
        for (what, older, spills) in cases {
            assert_eq!(spills_after(older, newer, base + 8), spills, "{what}");
        }
        // The marker's timestamp against the newest batch's: 19 bits of difference.
        let newest_ts = base + 4;
        let edge = 1 << 18;
        for (gap, spills) in [
            (edge - 1, false),
            (-edge, false),
            (edge, true),
            (-edge - 1, true),
        ] {
            let after = spills_after(older(3, 0, 0), newer, newest_ts + gap);
            assert_eq!(after, spills, "marker gap {gap}");
        }
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
