//! The cleaner's offset map: Kafka's `SkimpyOffsetMap`, the latest offset per key digest.
//!
//! One buffer of exactly `memory` bytes (rounded down to whole slots) holds `slots` entries of
//! `digest | offset int64`; a slot is empty when its first 24 bytes are zero, as Kafka tests it. Keys are
//! the digest of exactly the key bytes; probing reads the 4-byte big-endian int at
//! `min(attempt, digest_len - 4)` of the digest plus `max(0, attempt - digest_len + 4)`, then
//! `abs(probe) % slots` (`Utils.abs`: `i32::MIN` maps to 0). Two keys with the same digest are one key,
//! as in Kafka. Kafka 4.4.0's `CleanerConfig.HASH_ALGORITHM` is `"MD5"` (read from the
//! kafka-storage-4.4.0 jar with `javap -constants`), selectable as [`DigestKind::Md5`].
//!
//! The digest never reaches disk: only its length sets the slot count, and so the entry count at which
//! the map is full and a pass ends. klog's default, [`DigestKind::Xxh3`], is XXH3-128: 16 bytes like
//! MD5, so the same slots and the same full point, and a pass ends at exactly the offset Kafka's would.
//! The one difference is which pairs of distinct keys collide (then one key's older records are dropped,
//! as in Kafka with MD5): about 2^-128 per pair for either digest. The probe sequence differs, which
//! changes only where a digest sits in the buffer, never what `get` answers.

use md5::{Digest, Md5};
use sha2::Sha256;
use twox_hash::XxHash3_128;

/// The digest of a key (`log.cleaner` hash algorithm).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DigestKind {
    /// XXH3-128, 16 bytes (big-endian): klog's default, the same slots and full point as MD5.
    #[default]
    Xxh3,
    /// MD5, 16 bytes: Kafka 4.4.0's `CleanerConfig.HASH_ALGORITHM`.
    Md5,
    /// SHA-256, 32 bytes.
    Sha256,
}

impl DigestKind {
    /// The digest's length in bytes.
    pub fn digest_len(self) -> usize {
        match self {
            DigestKind::Xxh3 | DigestKind::Md5 => 16,
            DigestKind::Sha256 => 32,
        }
    }

    /// The name `--digest` takes: `xxh3`, `md5`, `sha256`.
    pub fn name(self) -> &'static str {
        match self {
            DigestKind::Xxh3 => "xxh3",
            DigestKind::Md5 => "md5",
            DigestKind::Sha256 => "sha256",
        }
    }

    /// The kind named `name` (see [`DigestKind::name`]), `None` for any other.
    pub fn from_name(name: &str) -> Option<Self> {
        [DigestKind::Xxh3, DigestKind::Md5, DigestKind::Sha256]
            .into_iter()
            .find(|d| d.name() == name)
    }

    /// The digest of `key` in this algorithm, as [`OffsetMap::digest`] of a map of this kind computes it
    /// (a map build's readers digest keys on threads of their own).
    pub fn key_digest(self, key: &[u8]) -> KeyDigest {
        let mut bytes = [0u8; 32];
        self.digest_into(key, &mut bytes);
        KeyDigest(bytes)
    }

    fn digest_into(self, key: &[u8], out: &mut [u8; 32]) {
        match self {
            DigestKind::Xxh3 => out[..16].copy_from_slice(&XxHash3_128::oneshot(key).to_be_bytes()),
            DigestKind::Md5 => out[..16].copy_from_slice(&Md5::digest(key)),
            DigestKind::Sha256 => out.copy_from_slice(&Sha256::digest(key)),
        }
    }
}

/// A key's digest in an [`OffsetMap`]'s algorithm ([`OffsetMap::digest`]); only that map reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyDigest([u8; 32]);

/// Kafka's `SkimpyOffsetMap`: digest → latest offset, in one fixed buffer.
#[derive(Debug)]
pub struct OffsetMap {
    bytes: Vec<u8>,
    digest: DigestKind,
    hash_size: usize,
    bytes_per_entry: usize,
    slots: usize,
    /// `(slots * load_factor) as int`, computed once: the map build asks for it before every put.
    max_desired_size: usize,
    entries: usize,
    last_offset: i64,
}

impl OffsetMap {
    /// A map over `memory` bytes (`slots = memory / (digest_len + 8)`), full at `slots * load_factor`.
    pub fn new(memory: usize, load_factor: f64, digest: DigestKind) -> Self {
        let hash_size = digest.digest_len();
        let bytes_per_entry = hash_size + 8;
        let slots = memory / bytes_per_entry;
        OffsetMap {
            bytes: vec![0; slots * bytes_per_entry],
            digest,
            hash_size,
            bytes_per_entry,
            slots,
            max_desired_size: (slots as f64 * load_factor) as usize,
            entries: 0,
            last_offset: -1,
        }
    }

    /// Empties the map; the latest offset becomes -1.
    pub fn clear(&mut self) {
        self.bytes.fill(0);
        self.entries = 0;
        self.last_offset = -1;
    }

    /// The number of slots.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The digest of `key` in this map's algorithm: computed once, it can be touched
    /// ([`OffsetMap::prefetch`]) before it is put or looked up.
    pub fn digest(&self, key: &[u8]) -> KeyDigest {
        let mut bytes = [0u8; 32];
        self.digest.digest_into(key, &mut bytes);
        KeyDigest(bytes)
    }

    /// Records `offset` as the latest for `key`. A new key when every slot is taken is not stored
    /// (Kafka throws there; the pass stops at [`OffsetMap::max_desired_size`] first, and an absent key
    /// only makes the cleaner retain more).
    pub fn put(&mut self, key: &[u8], offset: i64) {
        let digest = self.digest(key);
        self.put_digest(&digest, offset);
    }

    /// [`OffsetMap::put`] of a key whose digest is already computed.
    pub fn put_digest(&mut self, digest: &KeyDigest, offset: i64) {
        if self.slots == 0 {
            // A buffer below one slot holds nothing (probing would divide by zero).
            return;
        }
        let hash = &digest.0[..self.hash_size];
        let mut attempt = 0;
        loop {
            let pos = self.position_of(hash, attempt);
            if self.is_empty(pos) {
                if self.entries >= self.slots {
                    return;
                }
                self.bytes[pos..pos + self.hash_size].copy_from_slice(hash);
                self.write_offset(pos, offset);
                self.entries += 1;
                self.last_offset = offset;
                return;
            }
            if self.holds(pos, hash) {
                self.write_offset(pos, offset);
                self.last_offset = offset;
                return;
            }
            attempt += 1;
            if attempt > self.slots + self.hash_size {
                return;
            }
        }
    }

    /// The latest offset stored for `key`, -1 when absent.
    pub fn get(&self, key: &[u8]) -> i64 {
        if self.slots == 0 {
            return -1;
        }
        self.get_digest(&self.digest(key))
    }

    /// [`OffsetMap::get`] of a key whose digest is already computed.
    pub fn get_digest(&self, digest: &KeyDigest) -> i64 {
        if self.slots == 0 {
            return -1;
        }
        let hash = &digest.0[..self.hash_size];
        let mut attempt = 0;
        loop {
            if attempt >= self.slots {
                return -1;
            }
            let pos = self.position_of(hash, attempt);
            if self.is_empty(pos) {
                return -1;
            }
            if self.holds(pos, hash) {
                return self.read_offset(pos);
            }
            attempt += 1;
        }
    }

    /// Starts loading the first slot `digest` probes, so that a later put or get of it finds the slot in
    /// the cache: a 128 MiB map misses the cache on nearly every probe, and the digests of a batch's keys
    /// touched together wait for their misses together rather than one after another. A plain load whose
    /// value is not waited on (the crate denies `unsafe`, which a prefetch intrinsic needs); returns a
    /// byte of the slot for the caller to fold into [`std::hint::black_box`] so the load is not removed.
    #[inline]
    pub fn prefetch(&self, digest: &KeyDigest) -> u8 {
        if self.slots == 0 {
            return 0;
        }
        let pos = self.position_of(&digest.0[..self.hash_size], 0);
        self.bytes[pos]
    }

    /// Sets the latest offset (the pass moves it to the end of the range it read).
    pub fn update_latest_offset(&mut self, offset: i64) {
        self.last_offset = offset;
    }

    /// The offset of the last put (or update), -1 after clear.
    pub fn latest_offset(&self) -> i64 {
        self.last_offset
    }

    /// Distinct digests held.
    pub fn size(&self) -> usize {
        self.entries
    }

    /// `(slots * load_factor) as int`: the pass treats the map as full at this size.
    pub fn max_desired_size(&self) -> usize {
        self.max_desired_size
    }

    /// The buffer's size in bytes (whole slots).
    pub fn memory(&self) -> usize {
        self.bytes.len()
    }

    fn read_offset(&self, pos: usize) -> i64 {
        let at = pos + self.hash_size;
        i64::from_be_bytes(self.bytes[at..at + 8].try_into().expect("8 bytes"))
    }

    /// Whether the slot at `pos` holds `hash` (a 16-byte digest is compared as one integer).
    fn holds(&self, pos: usize, hash: &[u8]) -> bool {
        let slot = &self.bytes[pos..pos + self.hash_size];
        match (<&[u8; 16]>::try_from(slot), <&[u8; 16]>::try_from(hash)) {
            (Ok(a), Ok(b)) => u128::from_ne_bytes(*a) == u128::from_ne_bytes(*b),
            _ => slot == hash,
        }
    }

    fn write_offset(&mut self, pos: usize, offset: i64) {
        self.bytes[pos + self.hash_size..pos + self.bytes_per_entry]
            .copy_from_slice(&offset.to_be_bytes());
    }

    /// Kafka's `isEmpty`: the first 24 bytes of the slot are zero.
    fn is_empty(&self, pos: usize) -> bool {
        // Every slot is at least 24 bytes (a 16-byte digest and an offset): three words.
        let word =
            |at: usize| u64::from_ne_bytes(self.bytes[at..at + 8].try_into().expect("8 bytes"));
        word(pos) | word(pos + 8) | word(pos + 16) == 0
    }

    fn position_of(&self, hash: &[u8], attempt: usize) -> usize {
        let at = attempt.min(self.hash_size - 4);
        let mut b = [0u8; 4];
        b.copy_from_slice(&hash[at..at + 4]);
        let extra = attempt.saturating_sub(self.hash_size - 4) as i32;
        let probe = i32::from_be_bytes(b).wrapping_add(extra);
        let abs = if probe == i32::MIN {
            0
        } else {
            probe.unsigned_abs() as usize
        };
        (abs % self.slots) * self.bytes_per_entry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_at_128_mib_matches_kafka() {
        let md5 = OffsetMap::new(134_217_728, 0.9, DigestKind::Md5);
        assert_eq!(md5.slots(), 5_592_405);
        assert_eq!(md5.max_desired_size(), 5_033_164);
        assert_eq!(md5.memory(), 5_592_405 * 24);
        let sha = OffsetMap::new(134_217_728, 0.9, DigestKind::Sha256);
        assert_eq!(sha.slots(), 3_355_443);
        assert_eq!(sha.max_desired_size(), 3_019_898);
        let xxh3 = OffsetMap::new(134_217_728, 0.9, DigestKind::Xxh3);
        assert_eq!(
            (xxh3.slots(), xxh3.max_desired_size()),
            (md5.slots(), md5.max_desired_size())
        );
        assert_eq!(DigestKind::default(), DigestKind::Xxh3);
    }

    #[test]
    fn put_get_latest_and_clear() {
        for digest in [DigestKind::Xxh3, DigestKind::Md5, DigestKind::Sha256] {
            let mut map = OffsetMap::new(4096, 0.9, digest);
            assert_eq!(map.latest_offset(), -1);
            assert_eq!(map.get(b"a"), -1);
            map.put(b"a", 5);
            map.put(b"b", 7);
            map.put(b"a", 9);
            assert_eq!(map.get(b"a"), 9);
            assert_eq!(map.get(b"b"), 7);
            assert_eq!(map.get(b""), -1);
            assert_eq!(map.size(), 2);
            assert_eq!(map.latest_offset(), 9);
            map.update_latest_offset(20);
            assert_eq!(map.latest_offset(), 20);
            map.clear();
            assert_eq!(
                (map.size(), map.latest_offset(), map.get(b"a")),
                (0, -1, -1)
            );
        }
    }

    #[test]
    fn a_full_map_keeps_every_key_it_holds() {
        // 10 slots: every slot taken, probing must still find each key and refuse an eleventh.
        for digest in [DigestKind::Xxh3, DigestKind::Md5] {
            let mut map = OffsetMap::new(240, 1.0, digest);
            assert_eq!(map.slots(), 10);
            for i in 0..10u8 {
                map.put(&[i], i as i64 + 100);
            }
            assert_eq!(map.size(), 10);
            for i in 0..10u8 {
                assert_eq!(map.get(&[i]), i as i64 + 100);
            }
            map.put(b"new", 1);
            assert_eq!(map.size(), 10);
            assert_eq!(map.get(b"new"), -1);
            map.put(&[3], 999);
            assert_eq!(map.get(&[3]), 999);
        }
    }

    #[test]
    fn a_digest_computed_first_puts_and_gets_as_its_key() {
        for digest in [DigestKind::Xxh3, DigestKind::Md5, DigestKind::Sha256] {
            let mut map = OffsetMap::new(4096, 0.9, digest);
            let keys: Vec<Vec<u8>> = (0..40u32)
                .map(|i| format!("key-{i}").into_bytes())
                .collect();
            let digests: Vec<KeyDigest> = keys.iter().map(|k| map.digest(k)).collect();
            let touched: u32 = digests.iter().map(|d| map.prefetch(d) as u32).sum();
            assert_eq!(touched, 0, "an empty map's slots are zero");
            for (i, d) in digests.iter().enumerate() {
                map.put_digest(d, i as i64);
            }
            map.put(&keys[3], 100);
            for (i, k) in keys.iter().enumerate() {
                let want = if i == 3 { 100 } else { i as i64 };
                assert_eq!((map.get(k), map.get_digest(&digests[i])), (want, want));
            }
            assert_eq!(map.size(), 40);
            assert_ne!(map.digest(b"a"), map.digest(b"b"));
        }
    }

    #[test]
    fn digest_names_round_trip() {
        for d in [DigestKind::Xxh3, DigestKind::Md5, DigestKind::Sha256] {
            assert_eq!(DigestKind::from_name(d.name()), Some(d));
        }
        assert_eq!(DigestKind::from_name("crc"), None);
    }

    #[test]
    fn zero_memory_holds_nothing_without_panicking() {
        let mut map = OffsetMap::new(10, 0.9, DigestKind::Md5);
        assert_eq!(map.slots(), 0);
        assert_eq!(map.get(b"k"), -1);
        let d = map.digest(b"k");
        assert_eq!((map.get_digest(&d), map.prefetch(&d)), (-1, 0));
        map.put_digest(&d, 5);
        assert_eq!(map.size(), 0);
        assert_eq!(map.max_desired_size(), 0);
        let _ = &mut map;
    }
}
