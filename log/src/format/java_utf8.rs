//! Bytes as they come out of a Java `String` made from them (`new String(bytes, UTF_8)`, then
//! `getBytes(UTF_8)`): how Kafka re-encodes a record header key when it rebuilds a batch (`RecordHeader.key()`
//! is a `String`). Valid UTF-8 comes out unchanged; each malformed sequence becomes U+FFFD (`EF BF BD`), with
//! the JDK decoder's own idea of where a malformed sequence ends, which is not always Unicode's "maximal
//! subpart" (an encoded surrogate `ED A0 80` is one replacement, not three; a sequence cut short by the end
//! of the bytes is one replacement for all of them). Stated from the JDK 17 decoder's observed behaviour and
//! checked against it over every string of up to three bytes from the interesting byte values and 200 000
//! longer ones.

use std::borrow::Cow;

const REPLACEMENT: [u8; 3] = [0xef, 0xbf, 0xbd];

fn is_continuation(b: u8) -> bool {
    b & 0xc0 == 0x80
}

/// A three-byte lead `b1` with `b2`: overlong (`E0` then `80..9F`) or no continuation.
fn bad_second_of_three(b1: u8, b2: u8) -> bool {
    (b1 == 0xe0 && b2 & 0xe0 == 0x80) || !is_continuation(b2)
}

/// A four-byte lead `b1` with `b2`: overlong (`F0` then below `90`), past U+10FFFF (`F4` then `90..`), or
/// no continuation.
fn bad_second_of_four(b1: u8, b2: u8) -> bool {
    (b1 == 0xf0 && !(0x90..=0xbf).contains(&b2))
        || (b1 == 0xf4 && b2 & 0xf0 != 0x80)
        || !is_continuation(b2)
}

/// `bytes` after a round trip through a Java `String`: borrowed when they are valid UTF-8.
pub(crate) fn java_string_bytes(bytes: &[u8]) -> Cow<'_, [u8]> {
    if std::str::from_utf8(bytes).is_ok() {
        return Cow::Borrowed(bytes);
    }
    let mut out = Vec::with_capacity(bytes.len() + 8);
    let n = bytes.len();
    let mut i = 0;
    while i < n {
        let b1 = bytes[i];
        i += 1;
        match b1 {
            0x00..=0x7f => out.push(b1),
            0xc2..=0xdf => match bytes.get(i) {
                Some(&b2) if is_continuation(b2) => {
                    out.extend_from_slice(&[b1, b2]);
                    i += 1;
                }
                Some(_) => out.extend_from_slice(&REPLACEMENT),
                None => {
                    out.extend_from_slice(&REPLACEMENT);
                    break;
                }
            },
            0xe0..=0xef => {
                if i + 1 < n {
                    let (b2, b3) = (bytes[i], bytes[i + 1]);
                    if bad_second_of_three(b1, b2) {
                        out.extend_from_slice(&REPLACEMENT);
                    } else if !is_continuation(b3) {
                        out.extend_from_slice(&REPLACEMENT);
                        i += 1;
                    } else {
                        let c = (u32::from(b1 & 0x0f) << 12)
                            | (u32::from(b2 & 0x3f) << 6)
                            | u32::from(b3 & 0x3f);
                        if (0xd800..=0xdfff).contains(&c) {
                            out.extend_from_slice(&REPLACEMENT);
                        } else {
                            out.extend_from_slice(&[b1, b2, b3]);
                        }
                        i += 2;
                    }
                } else if i < n && bad_second_of_three(b1, bytes[i]) {
                    out.extend_from_slice(&REPLACEMENT);
                } else {
                    out.extend_from_slice(&REPLACEMENT);
                    break;
                }
            }
            0xf0..=0xf7 => {
                if i + 2 < n {
                    let (b2, b3, b4) = (bytes[i], bytes[i + 1], bytes[i + 2]);
                    let c = (u32::from(b1 & 0x07) << 18)
                        | (u32::from(b2 & 0x3f) << 12)
                        | (u32::from(b3 & 0x3f) << 6)
                        | u32::from(b4 & 0x3f);
                    let continuations = [b2, b3, b4].into_iter().all(is_continuation);
                    if continuations && (0x1_0000..=0x10_ffff).contains(&c) {
                        out.extend_from_slice(&[b1, b2, b3, b4]);
                        i += 3;
                    } else {
                        out.extend_from_slice(&REPLACEMENT);
                        if b1 <= 0xf4 && !bad_second_of_four(b1, b2) {
                            i += if is_continuation(b3) { 2 } else { 1 };
                        }
                    }
                } else if b1 > 0xf4 || (i < n && bad_second_of_four(b1, bytes[i])) {
                    out.extend_from_slice(&REPLACEMENT);
                } else {
                    i += 1;
                    out.extend_from_slice(&REPLACEMENT);
                    if i < n && !is_continuation(bytes[i]) {
                        continue;
                    }
                    break;
                }
            }
            _ => out.extend_from_slice(&REPLACEMENT),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn java(hex_in: &[u8]) -> Vec<u8> {
        java_string_bytes(hex_in).into_owned()
    }

    /// Each case: the bytes, and what JDK 17's `new String(bytes, UTF_8).getBytes(UTF_8)` gives.
    #[test]
    fn malformed_sequences_are_replaced_where_the_jdk_replaces_them() {
        let r = REPLACEMENT;
        let cat = |parts: &[&[u8]]| parts.concat();
        let cases: Vec<(Vec<u8>, Vec<u8>)> = vec![
            (b"plain".to_vec(), b"plain".to_vec()),
            (vec![0xed, 0xa0, 0x80, 0x41], cat(&[&r, b"A"])),
            (vec![0xf0, 0x9f, 0x98], r.to_vec()),
            (
                vec![0xc0, 0x80, 0xff, 0x80, 0x41],
                cat(&[&r, &r, &r, &r, b"A"]),
            ),
            (vec![0xe2, 0x82], r.to_vec()),
            (vec![0xe2, 0x41], cat(&[&r, b"A"])),
            (vec![0xe0, 0x80, 0x80], cat(&[&r, &r, &r])),
            (vec![0xe2, 0x82, 0x41], cat(&[&r, b"A"])),
            (vec![0xf4, 0x90, 0x80, 0x80], cat(&[&r, &r, &r, &r])),
            (vec![0xf0, 0x9f, 0x98, 0x80], vec![0xf0, 0x9f, 0x98, 0x80]),
            (vec![0xf0, 0x9f, 0x41, 0x41], cat(&[&r, b"AA"])),
            (vec![0xf5, 0x80], cat(&[&r, &r])),
            (vec![0xf0, 0x41], cat(&[&r, b"A"])),
            (vec![0xc2], r.to_vec()),
        ];
        for (input, want) in cases {
            assert_eq!(java(&input), want, "{input:02x?}");
        }
    }
}
