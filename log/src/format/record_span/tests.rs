use super::*;
use crate::format::{BatchBuilder, Compression, Header, Record, RECORD_BATCH_OVERHEAD};
use proptest::prelude::*;

/// `n` records of varied shape: null and empty keys and values, headers on some, a long value.
fn payload(n: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    let long = vec![7u8; 300];
    for i in 0..n {
        let key = match i % 4 {
            0 => None,
            1 => Some(&b""[..]),
            _ => Some(&b"key-0000000042"[..]),
        };
        let value = match i % 5 {
            0 => None,
            1 => Some(&long[..]),
            _ => Some(&b"value"[..]),
        };
        let headers = [
            Header {
                key: "h",
                value: Some(b"hv"),
            },
            Header {
                key: "",
                value: None,
            },
        ];
        let headers = if i % 3 == 0 { &headers[..] } else { &[] };
        b.append_with_offset_delta(i as i32 * 2, 1000 + i as i64, key, value, headers)
            .unwrap();
    }
    b.build().unwrap()[RECORD_BATCH_OVERHEAD..].to_vec()
}

fn records(data: &[u8], declared: i32) -> Records<'_> {
    Records::new(data, declared, 100, 1000, 5, None, 0)
}

/// What a span says of its record, against the iterator's record.
fn same(span: &RecordSpan<'_>, record: &Record<'_>) -> bool {
    span.offset == record.offset
        && span.timestamp == record.timestamp
        && span.offset_delta == record.offset_delta
        && span.key == record.key
        && span.value == record.value
        && span.headers.clone().eq(record.headers.clone())
}

/// Every span (or the error) `next_span` yields against what the iterator yields on the same bytes.
fn assert_walks_alike(data: &[u8], declared: i32) {
    let mut spans = records(data, declared);
    let mut iter = records(data, declared);
    loop {
        match (spans.next_span(), iter.next()) {
            (None, None) => return,
            (Some(Ok(span)), Some(Ok(record))) => {
                assert!(same(&span, &record), "{span:?} {record:?}")
            }
            (Some(Err(a)), Some(Err(b))) => assert_eq!(a.to_string(), b.to_string()),
            (a, b) => panic!("span walk {a:?}, iterator {b:?}"),
        }
    }
}

#[test]
fn spans_are_the_records_and_their_tails_as_written() {
    let data = payload(12);
    assert_walks_alike(&data, 12);
    let mut spans = records(&data, 12);
    let mut at = 0;
    while let Some(span) = spans.next_span() {
        let span = span.unwrap();
        assert!(span.tail_is_canonical());
        // The tail ends the record: the record's bytes end where the tail does.
        let tail_at = data[at..]
            .windows(span.tail.len())
            .position(|w| w == span.tail)
            .unwrap()
            + at;
        at = tail_at + span.tail.len();
    }
    assert_eq!(at, data.len());
}

#[test]
fn the_end_of_the_records_is_checked_as_the_iterator_checks_it() {
    let data = payload(5);
    // Fewer records declared than written (trailing bytes), more (missing records), and none.
    for declared in [0, 3, 5, 6, 9] {
        assert_walks_alike(&data, declared);
    }
}

#[test]
fn a_longer_varint_than_kafka_writes_is_read_but_not_canonical() {
    // One record: key "k" with its length 1 written as a two-byte varint (0x82 0x00: zigzag 2).
    let tail = [0x82u8, 0x00, b'k', 0x02, b'v', 0x00];
    let mut body = vec![0u8, 0x00, 0x00];
    body.extend_from_slice(&tail);
    let mut data = vec![(body.len() as u8) << 1];
    data.extend_from_slice(&body);
    assert_walks_alike(&data, 1);
    let span = records(&data, 1).next_span().unwrap().unwrap();
    assert_eq!((span.key, span.value), (Some(&b"k"[..]), Some(&b"v"[..])));
    assert_eq!(span.tail, &tail[..]);
    assert!(!span.tail_is_canonical());
}

#[test]
fn a_header_key_that_is_not_utf8_is_not_canonical() {
    // Key null, value null, one header: key [0xff], value null.
    let body = [0u8, 0x00, 0x00, 0x01, 0x01, 0x02, 0x02, 0xff, 0x01];
    let mut data = vec![(body.len() as u8) << 1];
    data.extend_from_slice(&body);
    assert_walks_alike(&data, 1);
    let span = records(&data, 1).next_span().unwrap().unwrap();
    assert_eq!(span.headers.clone().next(), Some((&[0xffu8][..], None)));
    assert!(!span.tail_is_canonical());
}

proptest! {
    /// Any byte changed or any cut: the span walk yields what the iterator yields, error for error.
    #[test]
    fn a_damaged_payload_walks_alike(at in 0usize..2000, byte in any::<u8>(), cut in 0usize..2000) {
        let mut data = payload(9);
        let at = at % data.len();
        data[at] = byte;
        assert_walks_alike(&data, 9);
        let cut = cut % (data.len() + 1);
        assert_walks_alike(&data[..cut], 9);
    }
}

/// The records of `data` appended to a builder: field by field (`append_with_raw_headers`), or as spans.
fn rebuilt(data: &[u8], declared: i32, builder: BatchBuilder, as_spans: bool) -> BatchBuilder {
    let mut builder = builder.base_offset(100).delete_horizon_ms(5000);
    let mut spans = records(data, declared);
    while let Some(span) = spans.next_span() {
        let span = span.unwrap();
        if as_spans {
            builder.append_span(&span).unwrap();
        } else {
            builder
                .append_with_raw_headers(
                    span.offset_delta,
                    span.timestamp,
                    span.key,
                    span.value,
                    span.headers.clone(),
                )
                .unwrap();
        }
    }
    builder
}

#[test]
fn a_span_appended_is_the_record_appended_field_by_field() {
    // Canonical records, a long varint, a header key that is not UTF-8: every path gives the same bytes.
    let long_varint = [0x12u8, 0, 0, 0, 0x82, 0, b'k', 0x02, b'v', 0];
    let not_utf8 = [0x12u8, 0, 0, 0, 0x01, 0x01, 0x02, 0x02, 0xff, 0x01];
    for (data, declared) in [
        (payload(12), 12),
        (long_varint.to_vec(), 1),
        (not_utf8.to_vec(), 1),
    ] {
        let fields = rebuilt(&data, declared, BatchBuilder::new(Compression::None), false);
        let want = fields.build().unwrap();
        let spans = rebuilt(&data, declared, BatchBuilder::new(Compression::None), true);
        assert_eq!(spans.build().unwrap(), want);
        // Built in place after bytes already in the buffer: those bytes, then the same batch.
        let in_place = rebuilt(
            &data,
            declared,
            BatchBuilder::in_place(b"before".to_vec()),
            true,
        );
        let mut expected = b"before".to_vec();
        expected.extend_from_slice(&want);
        let (buf, built) = in_place.finish_in_place();
        assert_eq!((buf, built.is_ok()), (expected, true));
    }
}

#[test]
fn a_builder_in_place_gives_its_buffer_back_unchanged_when_it_fails() {
    let data = payload(3);
    let mut builder = rebuilt(&data, 3, BatchBuilder::in_place(b"before".to_vec()), true);
    // A last offset delta below the last record's is refused: the buffer comes back as it was given.
    builder.override_last_offset_delta(0);
    let (buf, built) = builder.finish_in_place();
    assert_eq!(buf, b"before");
    assert!(matches!(built, Err(Error::InvalidInput(_))), "{built:?}");
    let builder = rebuilt(&data, 3, BatchBuilder::in_place(b"before".to_vec()), true);
    assert_eq!(builder.into_buffer(), b"before");
    // No record: refused, the buffer unchanged.
    let (buf, built) = BatchBuilder::in_place(b"x".to_vec()).finish_in_place();
    assert_eq!((buf, built.is_err()), (b"x".to_vec(), true));
    // A builder not made in place finishes into a buffer of its own.
    let own = rebuilt(&data, 3, BatchBuilder::new(Compression::None), true);
    let (buf, built) = own.clone().finish_in_place();
    assert_eq!((buf, built.is_ok()), (own.build().unwrap(), true));
}
