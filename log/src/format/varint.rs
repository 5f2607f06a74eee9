//! Kafka's varints (zigzag, base 128, least significant group first) and a bounds-checked cursor.
//!
//! Length caps follow `ByteUtils.java`: a varint takes at most 5 bytes, a varlong at most 10; bits that
//! overflow the type inside the last allowed byte are dropped, as Java does.

use crate::RecordCorruption;

/// A forward-only reader over borrowed bytes. Every read is bounds-checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The bytes left.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// An unsigned varint of at most 5 bytes; `field` names it in errors.
    pub fn read_unsigned_varint(&mut self, field: &'static str) -> Result<u32, RecordCorruption> {
        let mut value: u32 = 0;
        for i in 0..5 {
            let b = self.read_u8(field)?;
            value |= ((b & 0x7f) as u32).wrapping_shl(7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(RecordCorruption::VarintTooLong { field })
    }

    /// An unsigned varlong of at most 10 bytes.
    pub fn read_unsigned_varlong(&mut self, field: &'static str) -> Result<u64, RecordCorruption> {
        let mut value: u64 = 0;
        for i in 0..10 {
            let b = self.read_u8(field)?;
            value |= ((b & 0x7f) as u64).wrapping_shl(7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(RecordCorruption::VarintTooLong { field })
    }

    /// A zigzag varint (`ByteUtils.readVarint`).
    pub fn read_varint(&mut self, field: &'static str) -> Result<i32, RecordCorruption> {
        let raw = self.read_unsigned_varint(field)?;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    /// A zigzag varlong (`ByteUtils.readVarlong`).
    pub fn read_varlong(&mut self, field: &'static str) -> Result<i64, RecordCorruption> {
        let raw = self.read_unsigned_varlong(field)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    /// One byte.
    pub fn read_u8(&mut self, field: &'static str) -> Result<u8, RecordCorruption> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or(RecordCorruption::Truncated { field })?;
        self.pos += 1;
        Ok(b)
    }

    /// `n` bytes, borrowed.
    pub fn read_bytes(
        &mut self,
        len: usize,
        field: &'static str,
    ) -> Result<&'a [u8], RecordCorruption> {
        if len > self.remaining() {
            return Err(RecordCorruption::Truncated { field });
        }
        let s = &self.buf[self.pos..self.pos + len];
        self.pos += len;
        Ok(s)
    }

    /// `N` bytes.
    pub fn read_array<const N: usize>(
        &mut self,
        field: &'static str,
    ) -> Result<[u8; N], RecordCorruption> {
        let s = self.read_bytes(N, field)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// A big-endian i16.
    pub fn read_i16(&mut self, field: &'static str) -> Result<i16, RecordCorruption> {
        Ok(i16::from_be_bytes(self.read_array(field)?))
    }

    /// A big-endian i32.
    pub fn read_i32(&mut self, field: &'static str) -> Result<i32, RecordCorruption> {
        Ok(i32::from_be_bytes(self.read_array(field)?))
    }

    /// A big-endian i64.
    pub fn read_i64(&mut self, field: &'static str) -> Result<i64, RecordCorruption> {
        Ok(i64::from_be_bytes(self.read_array(field)?))
    }

    /// A varint length followed by that many bytes; `-1` is null. Other negatives are corruption.
    pub fn read_nullable_bytes(
        &mut self,
        field: &'static str,
    ) -> Result<Option<&'a [u8]>, RecordCorruption> {
        let len = self.read_varint(field)?;
        if len == -1 {
            return Ok(None);
        }
        if len < 0 || len as usize > self.remaining() {
            return Err(RecordCorruption::BadFieldLength {
                field,
                length: len,
                available: self.remaining() as u64,
            });
        }
        self.read_bytes(len as usize, field).map(Some)
    }
}

/// Appends `v` as an unsigned varint.
pub fn write_unsigned_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` as an unsigned varlong.
pub fn write_unsigned_varlong(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` as a zigzag varint.
pub fn write_varint(out: &mut Vec<u8>, v: i32) {
    write_unsigned_varint(out, ((v << 1) ^ (v >> 31)) as u32);
}

/// Appends `v` as a zigzag varlong.
pub fn write_varlong(out: &mut Vec<u8>, v: i64) {
    write_unsigned_varlong(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// Bytes `write_varint` takes for `v`.
pub fn size_of_varint(v: i32) -> usize {
    size_of_unsigned_varlong(((v << 1) ^ (v >> 31)) as u32 as u64)
}

/// Bytes `write_varlong` takes for `v`.
pub fn size_of_varlong(v: i64) -> usize {
    size_of_unsigned_varlong(((v << 1) ^ (v >> 63)) as u64)
}

fn size_of_unsigned_varlong(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn kafka_examples() {
        let mut out = Vec::new();
        write_varint(&mut out, -1);
        write_varint(&mut out, 0);
        write_varint(&mut out, 5);
        assert_eq!(out, [0x01, 0x00, 0x0a]);
    }

    #[test]
    fn varint_longer_than_five_bytes_is_rejected() {
        let bytes = [0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        let err = Cursor::new(&bytes).read_varint("x").unwrap_err();
        assert_eq!(err, RecordCorruption::VarintTooLong { field: "x" });
        let bytes = [0xffu8; 11];
        assert!(Cursor::new(&bytes).read_varlong("x").is_err());
    }

    #[test]
    fn truncated_varint_is_rejected() {
        assert_eq!(
            Cursor::new(&[0x80]).read_varint("k").unwrap_err(),
            RecordCorruption::Truncated { field: "k" }
        );
    }

    proptest! {
        #[test]
        fn varint_round_trip(v: i32) {
            let mut out = Vec::new();
            write_varint(&mut out, v);
            prop_assert_eq!(out.len(), size_of_varint(v));
            let mut c = Cursor::new(&out);
            prop_assert_eq!(c.read_varint("v").unwrap(), v);
            prop_assert_eq!(c.remaining(), 0);
        }

        #[test]
        fn varlong_round_trip(v: i64) {
            let mut out = Vec::new();
            write_varlong(&mut out, v);
            prop_assert_eq!(out.len(), size_of_varlong(v));
            let mut c = Cursor::new(&out);
            prop_assert_eq!(c.read_varlong("v").unwrap(), v);
        }
    }
}
