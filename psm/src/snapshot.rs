//! Kafka's producer `.snapshot` file, format version 1 (`ProducerStateManager.readSnapshot` and
//! `writeSnapshot`, `ProducerSnapshot.json`). All integers are big-endian.
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 2 | `version` int16 = 1 |
//! | 2 | 4 | `crc` uint32: CRC-32C of bytes `[6, end)` |
//! | 6 | 4 | `count` int32 |
//! | 10 | 46 × count | entries |
//!
//! Entry: `producerId` int64, `epoch` int16, `lastSequence` int32, `lastOffset` int64, `offsetDelta`
//! int32, `timestamp` int64, `coordinatorEpoch` int32, `currentTxnFirstOffset` int64.
//!
//! Decoding follows Kafka's order: the schema is read first (a short file or a negative count fails
//! there), then the version, then the CRC. Like Kafka, bytes after the last entry are not an error by
//! themselves; they are covered by the CRC, so only a file whose CRC includes them passes.

use crate::error::{Error, SnapshotCorruption};

/// The only snapshot version Kafka reads and writes.
pub const PRODUCER_SNAPSHOT_VERSION: i16 = 1;
const CRC_OFFSET: usize = 2;
const COUNT_OFFSET: usize = 6;
const HEADER_SIZE: usize = 10;
/// Bytes per entry.
pub const SNAPSHOT_ENTRY_SIZE: usize = 46;

/// One producer in a snapshot. `current_txn_first_offset` is −1 when no transaction is open;
/// `last_sequence`/`last_offset` are −1 (and `offset_delta` 0) when no batch was cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SnapshotEntry {
    /// The producer id.
    pub producer_id: i64,
    /// The producer's epoch.
    pub producer_epoch: i16,
    /// The last sequence of the producer's newest batch.
    pub last_sequence: i32,
    /// The last offset of the producer's newest batch.
    pub last_offset: i64,
    /// Last offset minus first offset of that batch.
    pub offset_delta: i32,
    /// The newest batch's max timestamp.
    pub timestamp: i64,
    /// The epoch of the coordinator that wrote its last marker.
    pub coordinator_epoch: i32,
    /// The first offset of its open transaction, or -1.
    pub current_txn_first_offset: i64,
}

/// The bytes of a snapshot file holding `entries`, in the order Kafka writes them (see
/// `kafka_entry_order`), so the file is Kafka's own byte for byte for the same producers (readers,
/// Kafka's and klog's, do not depend on the order).
pub fn encode_snapshot(entries: &[SnapshotEntry]) -> Vec<u8> {
    let ordered = kafka_entry_order(entries);
    let count = i32::try_from(ordered.len()).expect("a snapshot holds at most i32::MAX producers");
    let mut bytes = Vec::with_capacity(HEADER_SIZE + SNAPSHOT_ENTRY_SIZE * ordered.len());
    bytes.extend_from_slice(&PRODUCER_SNAPSHOT_VERSION.to_be_bytes());
    bytes.extend_from_slice(&[0; 4]);
    bytes.extend_from_slice(&count.to_be_bytes());
    for entry in ordered {
        write_entry(entry, &mut bytes);
    }
    let crc = crc32c::crc32c(&bytes[COUNT_OFFSET..]);
    bytes[CRC_OFFSET..COUNT_OFFSET].copy_from_slice(&crc.to_be_bytes());
    bytes
}

/// `java.util.HashMap`'s largest table (`MAXIMUM_CAPACITY`).
const JAVA_MAX_CAPACITY: u64 = 1 << 30;

/// The order Kafka's `writeSnapshot` lists producers in: the iteration order of the
/// `HashMap<Long, ProducerStateEntry>` that holds them. Java iterates a `HashMap` bucket by bucket; a
/// `Long` lands in bucket `spread(hashCode) & (capacity - 1)`, where `hashCode` folds the high half
/// onto the low (`(int) (v ^ (v >>> 32))`) and `spread` does the same with 16 bits (`h ^ (h >>> 16)`);
/// the table starts at 16 buckets and doubles whenever it holds more than 3/4 of its capacity.
///
/// What klog cannot know is the map's history, so this is Kafka's order for a map that grew to hold
/// exactly these producers: Kafka's table never shrinks (expiry and `clear()` keep its capacity), so a
/// broker whose map once held more than 3/4 of the next power of two lists them by a larger table;
/// producers sharing a bucket are listed in the order they were put in, here by producer id (the order
/// Kafka allocates ids in); and a bucket of more than 8 (Java then grows the table, or makes it a tree)
/// is listed by id too. Stable, so equal ids keep their order (a later one replaces an earlier one on
/// load, as in Kafka's `loadProducerEntry`).
fn kafka_entry_order(entries: &[SnapshotEntry]) -> Vec<&SnapshotEntry> {
    let mut capacity: u64 = 16;
    while entries.len() as u64 > capacity / 4 * 3 && capacity < JAVA_MAX_CAPACITY {
        capacity *= 2;
    }
    let bucket = |producer_id: i64| {
        let v = producer_id as u64;
        let hash = (v ^ (v >> 32)) as u32;
        u64::from(hash ^ (hash >> 16)) & (capacity - 1)
    };
    let mut ordered: Vec<&SnapshotEntry> = entries.iter().collect();
    ordered.sort_by_key(|e| (bucket(e.producer_id), e.producer_id));
    ordered
}

/// The entries of a snapshot file, in file order.
pub fn decode_snapshot(bytes: &[u8]) -> Result<Vec<SnapshotEntry>, Error> {
    let mut reader = Reader { bytes, position: 0 };
    let version = reader.i16("version")?;
    let stored_crc = reader.u32("crc")?;
    let count = reader.i32("producer_entries")?;
    let count = usize::try_from(count)
        .map_err(|_| Error::CorruptSnapshot(SnapshotCorruption::NegativeCount { count }))?;
    let needed = count.saturating_mul(SNAPSHOT_ENTRY_SIZE);
    if needed > reader.remaining() {
        return Err(Error::CorruptSnapshot(SnapshotCorruption::Truncated {
            field: "producer_entries",
            needed: HEADER_SIZE.saturating_add(needed),
            available: bytes.len(),
        }));
    }
    let entries = (0..count)
        .map(|_| read_entry(&mut reader))
        .collect::<Result<Vec<_>, _>>()?;
    if version != PRODUCER_SNAPSHOT_VERSION {
        return Err(Error::CorruptSnapshot(SnapshotCorruption::UnknownVersion {
            version,
        }));
    }
    let computed_crc = crc32c::crc32c(&bytes[COUNT_OFFSET..]);
    if stored_crc != computed_crc {
        return Err(Error::CorruptSnapshot(SnapshotCorruption::Crc {
            stored: stored_crc,
            computed: computed_crc,
        }));
    }
    Ok(entries)
}

fn write_entry(entry: &SnapshotEntry, out: &mut Vec<u8>) {
    out.extend_from_slice(&entry.producer_id.to_be_bytes());
    out.extend_from_slice(&entry.producer_epoch.to_be_bytes());
    out.extend_from_slice(&entry.last_sequence.to_be_bytes());
    out.extend_from_slice(&entry.last_offset.to_be_bytes());
    out.extend_from_slice(&entry.offset_delta.to_be_bytes());
    out.extend_from_slice(&entry.timestamp.to_be_bytes());
    out.extend_from_slice(&entry.coordinator_epoch.to_be_bytes());
    out.extend_from_slice(&entry.current_txn_first_offset.to_be_bytes());
}

fn read_entry(reader: &mut Reader<'_>) -> Result<SnapshotEntry, Error> {
    Ok(SnapshotEntry {
        producer_id: reader.i64("producer_id")?,
        producer_epoch: reader.i16("epoch")?,
        last_sequence: reader.i32("last_sequence")?,
        last_offset: reader.i64("last_offset")?,
        offset_delta: reader.i32("offset_delta")?,
        timestamp: reader.i64("timestamp")?,
        coordinator_epoch: reader.i32("coordinator_epoch")?,
        current_txn_first_offset: reader.i64("current_txn_first_offset")?,
    })
}

/// A bounds-checked big-endian cursor; every read names the schema field it belongs to.
struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl Reader<'_> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.position
    }

    fn take<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], Error> {
        let end = self.position + N;
        let chunk = self
            .bytes
            .get(self.position..end)
            .ok_or(Error::CorruptSnapshot(SnapshotCorruption::Truncated {
                field,
                needed: end,
                available: self.bytes.len(),
            }))?;
        self.position = end;
        let mut array = [0; N];
        array.copy_from_slice(chunk);
        Ok(array)
    }

    fn i16(&mut self, field: &'static str) -> Result<i16, Error> {
        self.take(field).map(i16::from_be_bytes)
    }

    fn i32(&mut self, field: &'static str) -> Result<i32, Error> {
        self.take(field).map(i32::from_be_bytes)
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, Error> {
        self.take(field).map(u32::from_be_bytes)
    }

    fn i64(&mut self, field: &'static str) -> Result<i64, Error> {
        self.take(field).map(i64::from_be_bytes)
    }
}
