//! The four codecs of Kafka's batches, framed exactly as Kafka frames them.
//!
//! - gzip: a standard gzip stream.
//! - snappy: xerial framing (`\x82SNAPPY\0`, version 1, compatible 1, then 32 KiB blocks, each an int32
//!   length and a raw snappy block) as snappy-java's `SnappyOutputStream` writes; raw snappy (librdkafka) is
//!   accepted on read, as Java's `SnappyInputStream` does.
//! - lz4: the LZ4 frame format, 64 KiB independent blocks, no checksums (`Lz4BlockOutputStream`).
//! - zstd: a zstd frame written as Kafka's streaming writer writes it (no content size, the data flushed
//!   before the frame ends), byte for byte what Kafka 4.4.0 writes with zstd-jni 1.5.7 at level 3.
//!
//! Decompression always runs into a caller-owned buffer and stops at a size cap: a small compressed
//! batch must not be able to inflate without bound (a "bomb").

use std::fmt;
use std::io::{Read, Write};

use crate::Corruption;

/// Default cap on the decompressed size of one batch.
pub const DEFAULT_MAX_DECOMPRESSED_BYTES: usize = 128 * 1024 * 1024;

const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_LEN: usize = 16;
const XERIAL_BLOCK_SIZE: usize = 32 * 1024;
/// Kafka's zstd default level (`CompressionType.ZSTD` uses zstd-jni's default, 3).
const ZSTD_LEVEL: i32 = 3;

/// A batch codec (attribute bits 0-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    /// No compression (id 0).
    None,
    /// gzip (id 1).
    Gzip,
    /// Snappy in xerial's framing, as Kafka writes it (id 2).
    Snappy,
    /// LZ4 frames (id 3).
    Lz4,
    /// Zstandard (id 4).
    Zstd,
}

impl Compression {
    /// Every codec, in id order.
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The codec of attributes bits 0-2; `None` for 5-7.
    pub fn from_id(id: u8) -> Option<Self> {
        Some(match id {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            _ => return None,
        })
    }

    /// The id in the attributes.
    pub fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    /// The lowercase name Kafka uses (`compresscodec: gzip`, `compression.type=gzip`).
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// The codec named as Kafka's `compression.type` names it (`none`, `gzip`, `snappy`, `lz4`, `zstd`).
    pub fn from_name(name: &str) -> Option<Self> {
        Compression::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Appends the compressed form of `input` to `out`, framed as Kafka frames it.
    pub fn compress(self, input: &[u8], out: &mut Vec<u8>) {
        match self {
            Compression::None => out.extend_from_slice(input),
            Compression::Gzip => {
                let mut enc = flate2::write::GzEncoder::new(out, flate2::Compression::default());
                enc.write_all(input).expect("writing to a Vec cannot fail");
                enc.finish().expect("writing to a Vec cannot fail");
            }
            Compression::Snappy => compress_xerial_snappy(input, out),
            Compression::Lz4 => {
                let info = lz4_flex::frame::FrameInfo::new()
                    .block_size(lz4_flex::frame::BlockSize::Max64KB)
                    .block_mode(lz4_flex::frame::BlockMode::Independent);
                let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, out);
                enc.write_all(input).expect("writing to a Vec cannot fail");
                enc.finish().expect("writing to a Vec cannot fail");
            }
            // Kafka's `ZstdCompression.wrapForOutput`: a streaming `ZstdOutputStreamNoFinalizer` behind a
            // `BufferedOutputStream`, whose close flushes (ZSTD_e_flush: the data ends in a block not marked
            // last, and the frame states no content size) before it ends the frame (an empty last block).
            // zstd-jni flushes nothing when nothing was written, so an empty input is one single-shot frame.
            Compression::Zstd => {
                let mut enc =
                    zstd::stream::Encoder::new(out, ZSTD_LEVEL).expect("zstd takes level 3");
                enc.write_all(input).expect("writing to a Vec cannot fail");
                if !input.is_empty() {
                    enc.flush().expect("writing to a Vec cannot fail");
                }
                enc.finish().expect("writing to a Vec cannot fail");
            }
        }
    }

    /// Replaces `out`'s contents with the decompressed form of `input`, failing if it would exceed `limit`.
    pub fn decompress(
        self,
        input: &[u8],
        out: &mut Vec<u8>,
        limit: usize,
    ) -> Result<(), Corruption> {
        out.clear();
        match self {
            Compression::None => {
                if input.len() > limit {
                    return Err(self.too_large(limit));
                }
                out.extend_from_slice(input);
                Ok(())
            }
            Compression::Gzip => {
                self.read_capped(flate2::read::MultiGzDecoder::new(input), out, limit)
            }
            Compression::Snappy => {
                if input.starts_with(&XERIAL_MAGIC) {
                    decompress_xerial_snappy(input, out, limit)
                } else {
                    decompress_raw_snappy(input, out, limit)
                }
            }
            Compression::Lz4 => {
                self.read_capped(lz4_flex::frame::FrameDecoder::new(input), out, limit)
            }
            Compression::Zstd => {
                let dec =
                    zstd::stream::read::Decoder::with_buffer(input).map_err(|e| self.invalid(e))?;
                self.read_capped(dec, out, limit)
            }
        }
    }

    /// Reads the whole stream in fixed 32 KiB steps, so the verdict on a malformed stream never depends on
    /// the output buffer's capacity (`read_to_end` sizes its reads by it, and zstd's checks differ with the
    /// read size; the fuzzer found that).
    fn read_capped<R: Read>(
        self,
        mut reader: R,
        out: &mut Vec<u8>,
        limit: usize,
    ) -> Result<(), Corruption> {
        let mut chunk = [0u8; 32 * 1024];
        loop {
            let n = match reader.read(&mut chunk) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.invalid(e)),
            };
            if out.len() + n > limit {
                return Err(self.too_large(limit));
            }
            out.extend_from_slice(&chunk[..n]);
        }
    }

    fn invalid(self, e: impl fmt::Display) -> Corruption {
        Corruption::Decompression {
            codec: self,
            detail: e.to_string(),
        }
    }

    fn too_large(self, limit: usize) -> Corruption {
        Corruption::DecompressedTooLarge { codec: self, limit }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn compress_xerial_snappy(input: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    let mut encoder = snap::raw::Encoder::new();
    let mut block = vec![0u8; snap::raw::max_compress_len(XERIAL_BLOCK_SIZE)];
    for chunk in input.chunks(XERIAL_BLOCK_SIZE) {
        let n = encoder
            .compress(chunk, &mut block)
            .expect("the block buffer holds max_compress_len bytes");
        out.extend_from_slice(&(n as i32).to_be_bytes());
        out.extend_from_slice(&block[..n]);
    }
}

fn decompress_raw_snappy(input: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), Corruption> {
    let codec = Compression::Snappy;
    let len = snap::raw::decompress_len(input).map_err(|e| codec.invalid(e))?;
    if out.len() + len > limit {
        return Err(codec.too_large(limit));
    }
    let start = out.len();
    out.resize(start + len, 0);
    let n = snap::raw::Decoder::new()
        .decompress(input, &mut out[start..])
        .map_err(|e| codec.invalid(e))?;
    out.truncate(start + n);
    Ok(())
}

fn decompress_xerial_snappy(
    input: &[u8],
    out: &mut Vec<u8>,
    limit: usize,
) -> Result<(), Corruption> {
    let codec = Compression::Snappy;
    let mut rest = input;
    while !rest.is_empty() {
        // A xerial stream may be a concatenation of streams, each with its own header.
        if rest.starts_with(&XERIAL_MAGIC) {
            if rest.len() < XERIAL_HEADER_LEN {
                return Err(codec.invalid("truncated xerial header"));
            }
            rest = &rest[XERIAL_HEADER_LEN..];
            continue;
        }
        if rest.len() < 4 {
            return Err(codec.invalid("truncated xerial block length"));
        }
        let len = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
        if len < 0 || len as usize > rest.len() - 4 {
            return Err(codec.invalid(format_args!("xerial block length {len} runs past the end")));
        }
        let block = &rest[4..4 + len as usize];
        decompress_raw_snappy(block, out, limit)?;
        rest = &rest[4 + len as usize..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i % 251) as u8 ^ (i / 977) as u8).collect()
    }

    #[test]
    fn every_codec_round_trips_across_block_boundaries() {
        for codec in Compression::ALL {
            for n in [0, 1, 100, 32 * 1024, 32 * 1024 + 1, 200_000] {
                let input = sample(n);
                let mut c = Vec::new();
                codec.compress(&input, &mut c);
                let mut d = Vec::new();
                codec.decompress(&c, &mut d, usize::MAX / 2).unwrap();
                assert_eq!(d, input, "{codec} n={n}");
            }
        }
    }

    #[test]
    fn snappy_is_xerial_framed_with_32k_blocks() {
        let input = sample(70_000);
        let mut c = Vec::new();
        Compression::Snappy.compress(&input, &mut c);
        assert_eq!(&c[..16], b"\x82SNAPPY\0\0\0\0\x01\0\0\0\x01");
        // Three blocks: 32768 + 32768 + 4464 uncompressed bytes.
        let mut rest = &c[16..];
        let mut blocks = 0;
        while !rest.is_empty() {
            let len = i32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
            rest = &rest[4 + len..];
            blocks += 1;
        }
        assert_eq!(blocks, 3);
    }

    #[test]
    fn raw_snappy_is_accepted_on_read() {
        let input = sample(5000);
        let raw = snap::raw::Encoder::new().compress_vec(&input).unwrap();
        let mut d = Vec::new();
        Compression::Snappy
            .decompress(&raw, &mut d, 1 << 20)
            .unwrap();
        assert_eq!(d, input);
    }

    /// Kafka 4.4.0's bytes (`Compression.zstd().build().wrapForOutput(..)`, zstd-jni 1.5.7-17, written then
    /// closed) of `sample(n)`: the frame header without content size, the data block, an empty last block.
    #[test]
    fn zstd_is_byte_for_byte_kafkas_stream() {
        let kafka_1000_start = "28b52ffd0058e408002411000102030405060708090a0b0c0d0e0f";
        let mut c = Vec::new();
        Compression::Zstd.compress(&sample(1000), &mut c);
        let hex: String = c.iter().map(|b| format!("{b:02x}")).collect();
        assert!(hex.starts_with(kafka_1000_start), "{}", &hex[..60]);
        assert_eq!(c.len(), 296, "Kafka's stream is 296 bytes");
        assert_eq!(
            crc32fast::hash(&c),
            0x9cf1_2ac4,
            "CRC-32 of Kafka's 296 bytes"
        );
        assert_eq!(
            &c[c.len() - 3..],
            &[0x01, 0x00, 0x00],
            "an empty last raw block"
        );
        let mut empty = Vec::new();
        Compression::Zstd.compress(&[], &mut empty);
        assert_eq!(
            empty,
            [0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x00, 0x01, 0x00, 0x00]
        );
        // Across blocks (200 000 bytes: Kafka's stream is 10 448 bytes) the same holds.
        let mut big = Vec::new();
        Compression::Zstd.compress(&sample(200_000), &mut big);
        assert_eq!(big.len(), 10_448);
        assert_eq!(
            crc32fast::hash(&big),
            0x4cdb_a5d6,
            "CRC-32 of Kafka's 10 448 bytes"
        );
        assert_eq!(&big[4..6], &[0x00, 0x58]);
        assert_eq!(&big[big.len() - 3..], &[0x01, 0x00, 0x00]);
    }

    #[test]
    fn lz4_frame_header_is_kafkas() {
        let mut c = Vec::new();
        Compression::Lz4.compress(b"hello hello hello", &mut c);
        assert_eq!(
            &c[..4],
            &[0x04, 0x22, 0x4d, 0x18],
            "magic 0x184D2204 little-endian"
        );
        assert_eq!(
            c[4], 0x60,
            "FLG: version 01, independent blocks, no checksums, no content size"
        );
        assert_eq!(c[5], 0x40, "BD: 64 KiB blocks");
    }

    #[test]
    fn bombs_stop_at_the_limit() {
        let input = vec![0u8; 1 << 20];
        for codec in Compression::ALL {
            let mut c = Vec::new();
            codec.compress(&input, &mut c);
            let mut d = Vec::new();
            let err = codec.decompress(&c, &mut d, 4096).unwrap_err();
            assert_eq!(
                err,
                Corruption::DecompressedTooLarge { codec, limit: 4096 },
                "{codec}"
            );
        }
    }

    proptest! {
        #[test]
        fn garbage_never_panics(codec_id in 0u8..5, bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let codec = Compression::from_id(codec_id).unwrap();
            let mut d = Vec::new();
            let _ = codec.decompress(&bytes, &mut d, 1 << 16);
        }
    }
}
