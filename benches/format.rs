//! Record batch format throughput: klog's zero-copy v2 views beside `kafka-protocol` decoding the same
//! bytes, raw CRC-32C over the same bytes, and a memcpy of the same bytes, all in one run.
//!
//! Data: one buffer of ~16 MiB of v2 batches as a Java producer with `batch.size=16384` fills them:
//! 1 KiB values, a 12-byte key and one 16-byte header per record, 15 records (~16 KiB) per batch.
//! Uncompressed batches carry random (incompressible) values; the lz4 and zstd buffers hold the same
//! number of batches and records with text-like (compressible) values, so the codecs do real work.
//!
//! Groups (criterion reports bytes/s of the stored buffer; ratios only make sense within one run):
//! - `parse_crc/*`: walk every batch of the uncompressed buffer, validate header and CRC-32C.
//! - `records/*`, `records_lz4/*`, `records_zstd/*`: walk every record of every batch (CRC included),
//!   touching key, value and header lengths.
//!
//! Paired ratios: on a shared 2-vCPU VM the load changes between two criterion benchmarks run seconds
//! apart, so the bench also times each compared pair back to back, alternating the order, for a number of
//! rounds, and prints the median of the per-round ratios (`paired ...` lines on stderr). Those are the
//! ratios to quote. Set `KLOG_BENCH_PAIRED=0` to skip them; a criterion filter also filters them (by
//! substring of `paired/<group>/<a>_vs_<b>`).
//!
//! Clock: criterion measures wall time by default; `KLOG_BENCH_CLOCK=cpu` makes it measure the thread's
//! CPU time instead (Linux). That removes time slicing by other processes, not their cache and memory
//! interference, so sequential criterion ratios stay noisy on a shared VM: quote the paired ratios.
//!
//! Run: `cargo bench --bench format` (or `-- --quick`); `cargo test --benches` runs each bench once.
//! Results are written to `BENCHMARKS.md` by hand from `target/criterion/**/new/estimates.json` and the
//! `paired` lines.

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use common::{alternating, quartiles, thread_cpu_time, CriterionArgs};
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, Criterion, SamplingMode, Throughput,
};
use kafka_protocol::records::RecordBatchDecoder;
use klog::log::format::{
    AnyBatch, BatchBuilder, Batches, Compression, Header, RecordBatch, CRC_START,
    DEFAULT_MAX_DECOMPRESSED_BYTES, RECORD_BATCH_OVERHEAD,
};

/// Target size of the buffer of batches. Unoptimised builds (`cargo test --benches`, which runs each
/// benchmark once as a smoke test) use 1 MiB so that CI stays fast.
const BUFFER_BYTES: usize = if cfg!(debug_assertions) {
    1 << 20
} else {
    16 << 20
};
/// Kafka producer `batch.size` default.
const BATCH_BYTES: usize = 16 << 10;
const VALUE_BYTES: usize = 1 << 10;
const KEY_BYTES: usize = 12;
const HEADER_VALUE_BYTES: usize = 16;
/// Records per 16 KiB batch for the record shape above (each record encodes to ~1,075 bytes).
const RECORDS_PER_BATCH: usize = 15;

/// xorshift64*: deterministic, fast, good enough to defeat compression.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn fill_random(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(8) {
            let x = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&x[..chunk.len()]);
        }
    }

    /// Log-line-like text: words drawn from a small vocabulary, with random numbers between them.
    fn fill_text(&mut self, out: &mut [u8]) {
        const WORDS: [&str; 32] = [
            "user",
            "order",
            "id",
            "status",
            "shipped",
            "pending",
            "amount",
            "currency",
            "EUR",
            "USD",
            "timestamp",
            "region",
            "eu-west-1",
            "us-east-2",
            "session",
            "click",
            "view",
            "cart",
            "checkout",
            "payment",
            "accepted",
            "declined",
            "sku",
            "quantity",
            "price",
            "discount",
            "coupon",
            "device",
            "mobile",
            "desktop",
            "ok",
            "error",
        ];
        let mut i = 0;
        while i < out.len() {
            let r = self.next_u64();
            let number;
            let word: &[u8] = if r & 3 == 0 {
                // A number: mostly unique bytes, as in real events.
                number = format!("{:06}", (r >> 8) % 1_000_000);
                number.as_bytes()
            } else {
                WORDS[(r >> 2) as usize % WORDS.len()].as_bytes()
            };
            for &b in word.iter().chain(b" ") {
                if i == out.len() {
                    break;
                }
                out[i] = b;
                i += 1;
            }
        }
    }
}

/// One buffer of concatenated batches and what is known about it.
struct Corpus {
    codec: Compression,
    buf: Vec<u8>,
    /// `[CRC_START..end)` of every batch, as absolute ranges into `buf`.
    crc_ranges: Vec<(usize, usize)>,
    /// The records payload (compressed stream) of every batch.
    payloads: Vec<(usize, usize)>,
    batches: u64,
    records: u64,
    /// Sum of key, value, header key and header value lengths over all records.
    touched_bytes: u64,
    /// Size of all record payloads before compression.
    uncompressed_bytes: u64,
}

fn build_corpus(codec: Compression, batches: usize, seed: u64) -> Corpus {
    let mut rng = Rng(seed);
    let mut buf = Vec::with_capacity(BUFFER_BYTES + BATCH_BYTES);
    let mut value = vec![0u8; VALUE_BYTES];
    let mut trace = [0u8; HEADER_VALUE_BYTES];
    let mut offset = 0i64;
    let mut uncompressed_bytes = 0u64;
    let timestamp = 1_700_000_000_000i64;
    for _ in 0..batches {
        let mut b = BatchBuilder::new(codec)
            .base_offset(offset)
            .partition_leader_epoch(7)
            .producer(4242, 3, offset as i32);
        for i in 0..RECORDS_PER_BATCH {
            if codec == Compression::None {
                rng.fill_random(&mut value);
            } else {
                rng.fill_text(&mut value);
            }
            rng.fill_random(&mut trace);
            let key = format!("key-{:08}", offset + i as i64);
            debug_assert_eq!(key.len(), KEY_BYTES);
            b.append(
                timestamp + offset + i as i64,
                Some(key.as_bytes()),
                Some(&value),
                &[Header {
                    key: "trace-id",
                    value: Some(&trace),
                }],
            )
            .expect("valid record");
        }
        let start = buf.len();
        b.build_into(&mut buf).expect("valid batch");
        if codec == Compression::None {
            assert!(buf.len() - start <= BATCH_BYTES, "batch exceeds batch.size");
            uncompressed_bytes += (buf.len() - start - RECORD_BATCH_OVERHEAD) as u64;
        }
        offset += RECORDS_PER_BATCH as i64;
    }
    let mut corpus = Corpus {
        codec,
        buf,
        crc_ranges: Vec::new(),
        payloads: Vec::new(),
        batches: 0,
        records: 0,
        touched_bytes: 0,
        uncompressed_bytes,
    };
    let mut scratch = Vec::new();
    let mut pos = 0;
    for batch in Batches::new(&corpus.buf) {
        let AnyBatch::V2(batch) = batch.expect("valid batch") else {
            unreachable!("only v2 batches are built")
        };
        let end = pos + batch.size_in_bytes();
        corpus.crc_ranges.push((pos + CRC_START, end));
        corpus.payloads.push((pos + RECORD_BATCH_OVERHEAD, end));
        corpus.batches += 1;
        if codec != Compression::None {
            codec
                .decompress(
                    batch.records_payload(),
                    &mut scratch,
                    DEFAULT_MAX_DECOMPRESSED_BYTES,
                )
                .expect("valid payload");
            corpus.uncompressed_bytes += scratch.len() as u64;
        }
        pos = end;
    }
    assert_eq!(pos, corpus.buf.len());
    let (records, touched) = klog_records(&corpus.buf, &mut scratch);
    corpus.records = records;
    corpus.touched_bytes = touched;
    corpus
}

/// Number of batches that fill `BUFFER_BYTES` with uncompressed 16 KiB batches.
fn batch_count() -> usize {
    let probe = build_corpus(Compression::None, 4, 1);
    BUFFER_BYTES / (probe.buf.len() / 4)
}

// ---------------------------------------------------------------------------------------------------
// The measured loops. Each returns values derived from everything it read, so nothing is optimised out.

/// klog: every batch, header checks and CRC-32C (`Batches` verifies CRCs by default).
fn klog_parse_crc(buf: &[u8]) -> (u64, i64) {
    let (mut records, mut last_offset) = (0u64, 0i64);
    for batch in Batches::new(buf) {
        match batch.expect("valid batch") {
            AnyBatch::V2(b) => {
                records += b.records_count() as u64;
                last_offset = b.last_offset();
            }
            AnyBatch::Legacy(_) => unreachable!(),
        }
    }
    (records, last_offset)
}

/// klog: like [`klog_parse_crc`] without the CRC, to separate structure cost from checksum cost.
fn klog_parse_no_crc(buf: &[u8]) -> (u64, i64) {
    let (mut records, mut last_offset) = (0u64, 0i64);
    for batch in Batches::new(buf).without_crc() {
        if let AnyBatch::V2(b) = batch.expect("valid batch") {
            records += b.records_count() as u64;
            last_offset = b.last_offset();
        }
    }
    (records, last_offset)
}

/// klog: `RecordBatch::parse` in a loop, without the `Batches` iterator's tail handling.
fn klog_record_batch_parse(buf: &[u8]) -> (u64, i64) {
    let (mut records, mut last_offset) = (0u64, 0i64);
    let mut rest = buf;
    let mut position = 0u64;
    while !rest.is_empty() {
        let (b, r) = RecordBatch::parse(rest, position).expect("valid batch");
        records += b.records_count() as u64;
        last_offset = b.last_offset();
        position += b.size_in_bytes() as u64;
        rest = r;
    }
    (records, last_offset)
}

/// The hardware limit of the CRC part: CRC-32C over exactly the bytes each batch's CRC covers.
fn raw_crc32c(buf: &[u8], ranges: &[(usize, usize)]) -> u32 {
    let mut acc = 0u32;
    for &(s, e) in ranges {
        // The CRC library klog uses (crc-fast since 0d3adc3), so that parse+CRC / raw is klog's overhead.
        acc ^= klog::log::format::crc32c(&buf[s..e]);
    }
    acc
}

/// kafka-protocol's header-only path: batch headers and CRC-32C, no record decoding, one `Vec` of infos.
fn kp_batch_info(bytes: &Bytes) -> (u64, i64) {
    let mut b = bytes.clone();
    let infos = RecordBatchDecoder::decode_batch_info(&mut b).expect("valid batches");
    let records = infos.iter().map(|i| i.record_count as u64).sum();
    (records, infos.last().map_or(0, |i| i.min_offset))
}

/// kafka-protocol's `decode`: header, CRC-32C, and every record into an owned `Record`.
fn kp_decode_count(bytes: &Bytes) -> (u64, i64) {
    let mut b = bytes.clone();
    let (mut records, mut last_offset) = (0u64, 0i64);
    while b.has_remaining() {
        let set = RecordBatchDecoder::decode(&mut b).expect("valid batch");
        records += set.records.len() as u64;
        last_offset = set.records.last().map_or(0, |r| r.offset);
    }
    (records, last_offset)
}

/// klog: every record of every batch; compressed payloads inflate into one reused scratch buffer.
fn klog_records(buf: &[u8], scratch: &mut Vec<u8>) -> (u64, u64) {
    let (mut records, mut touched) = (0u64, 0u64);
    for batch in Batches::new(buf) {
        let AnyBatch::V2(b) = batch.expect("valid batch") else {
            unreachable!()
        };
        for r in b.records(scratch).expect("valid payload") {
            let r = r.expect("valid record");
            records += 1;
            touched += r.key.map_or(0, |k| k.len()) as u64 + r.value.map_or(0, |v| v.len()) as u64;
            for (k, v) in r.headers {
                touched += k.len() as u64 + v.map_or(0, |v| v.len()) as u64;
            }
        }
    }
    (records, touched)
}

/// kafka-protocol: the same walk over owned `Record`s.
fn kp_records(bytes: &Bytes) -> (u64, u64) {
    let mut b = bytes.clone();
    let (mut records, mut touched) = (0u64, 0u64);
    while b.has_remaining() {
        let set = RecordBatchDecoder::decode(&mut b).expect("valid batch");
        for r in &set.records {
            records += 1;
            touched += r.key.as_ref().map_or(0, |k| k.len()) as u64
                + r.value.as_ref().map_or(0, |v| v.len()) as u64;
            for (k, v) in &r.headers {
                touched += k.len() as u64 + v.as_ref().map_or(0, |v| v.len()) as u64;
            }
        }
    }
    (records, touched)
}

/// klog's codec alone: inflate every batch's payload into the reused scratch buffer.
fn klog_decompress_only(c: &Corpus, scratch: &mut Vec<u8>) -> u64 {
    let mut total = 0u64;
    for &(s, e) in &c.payloads {
        c.codec
            .decompress(&c.buf[s..e], scratch, DEFAULT_MAX_DECOMPRESSED_BYTES)
            .expect("valid payload");
        total += scratch.len() as u64;
    }
    total
}

// ---------------------------------------------------------------------------------------------------

/// Every implementation must see the same batches and records, or the comparison means nothing.
fn cross_check(c: &Corpus, bytes: &Bytes) {
    assert_eq!(bytes.len(), c.buf.len());
    let (kp_n, kp_touched) = kp_records(bytes);
    assert_eq!(
        (kp_n, kp_touched),
        (c.records, c.touched_bytes),
        "kafka-protocol and klog disagree on {}",
        c.codec
    );
    if c.codec == Compression::None {
        let expect_records = c.records;
        assert_eq!(klog_parse_crc(&c.buf).0, expect_records);
        assert_eq!(klog_parse_no_crc(&c.buf).0, expect_records);
        assert_eq!(klog_record_batch_parse(&c.buf).0, expect_records);
        assert_eq!(kp_batch_info(bytes).0, expect_records);
        assert_eq!(kp_decode_count(bytes).0, expect_records);
        assert_eq!(klog_parse_crc(&c.buf).1, kp_decode_count(bytes).1);
    }
    eprintln!(
        "corpus {:>4}: {} batches, {} records, {} stored bytes, {} uncompressed record bytes (ratio {:.2})",
        c.codec.name(),
        c.batches,
        c.records,
        c.buf.len(),
        c.uncompressed_bytes,
        c.uncompressed_bytes as f64 / (c.buf.len() as f64 - c.batches as f64 * 61.0),
    );
}

/// How many paired rounds to run, from criterion's command line: none when listing or profiling, one in
/// test mode (`cargo test --benches`), few with `--quick`.
struct Paired {
    rounds: usize,
    args: CriterionArgs,
}

impl Paired {
    fn from_args() -> Self {
        let args = CriterionArgs::from_env();
        Paired {
            rounds: args.paired_rounds(21, 7),
            args,
        }
    }

    /// Times `a` and `b` back to back, alternating which goes first, and prints the median over rounds of
    /// time(b) / time(a), i.e. how many times faster `a` is than `b`, by thread CPU time (robust to other
    /// processes sharing the vCPUs) and by wall time. `bytes` is what one call processes.
    fn compare(
        &self,
        group: &str,
        (a_name, mut a): (&str, impl FnMut()),
        (b_name, mut b): (&str, impl FnMut()),
        bytes: usize,
    ) {
        let id = format!("paired/{group}/{a_name}_vs_{b_name}");
        if !self.args.selected(self.rounds, &id) {
            return;
        }
        // Warm both up and pick a repetition count so that one timing takes at least ~5 ms.
        let once = |f: &mut dyn FnMut()| {
            let t = Instant::now();
            f();
            t.elapsed()
        };
        let slowest = once(&mut a).max(once(&mut b)).max(Duration::from_micros(1));
        let reps = (Duration::from_millis(5).as_nanos() / slowest.as_nanos()).clamp(1, 1000) as u32;
        let time = |f: &mut dyn FnMut()| {
            let (w, c) = (Instant::now(), thread_cpu_time());
            for _ in 0..reps {
                f();
            }
            let cpu = thread_cpu_time().zip(c).map(|(end, start)| end - start);
            let wall = w.elapsed();
            (
                (cpu.unwrap_or(wall) / reps).as_secs_f64(),
                (wall / reps).as_secs_f64(),
            )
        };
        // Per round: (cpu a, cpu b, wall a, wall b).
        let samples: Vec<_> = alternating(self.rounds, || time(&mut a), || time(&mut b))
            .into_iter()
            .map(|(x, y)| (x.0, y.0, x.1, y.1))
            .collect();
        let cpu = quartiles(samples.iter().map(|s| s.1 / s.0).collect());
        let wall = quartiles(samples.iter().map(|s| s.3 / s.2).collect());
        if self.rounds == 1 {
            eprintln!("{id}: ran once (test mode, not a measurement)");
            return;
        }
        let gib = |v: Vec<f64>| bytes as f64 / quartiles(v).1 / (1u64 << 30) as f64;
        eprintln!(
            "{id}: cpu-time ratio {:.3} (IQR {:.3}-{:.3}); wall ratio {:.3} (IQR {:.3}-{:.3}); \
             {} rounds x {reps}; cpu-time medians {a_name} {:.2} GiB/s, {b_name} {:.2} GiB/s",
            cpu.1,
            cpu.0,
            cpu.2,
            wall.1,
            wall.0,
            wall.2,
            self.rounds,
            gib(samples.iter().map(|s| s.0).collect()),
            gib(samples.iter().map(|s| s.1).collect()),
        );
    }
}

/// Criterion's clock: wall time by default (criterion's own `WallTime` behaviour), or the thread's CPU
/// time with `KLOG_BENCH_CLOCK=cpu`, which does not count time other processes hold the CPU.
#[derive(Clone, Copy)]
enum Clock {
    Wall,
    ThreadCpu,
}

impl Clock {
    fn from_env() -> Self {
        match std::env::var("KLOG_BENCH_CLOCK").as_deref() {
            Ok("cpu") if thread_cpu_time().is_some() => Clock::ThreadCpu,
            Ok("cpu") => {
                eprintln!("KLOG_BENCH_CLOCK=cpu: no thread CPU clock here, using wall time");
                Clock::Wall
            }
            _ => Clock::Wall,
        }
    }
}

impl criterion::measurement::Measurement for Clock {
    type Intermediate = (Instant, Option<Duration>);
    type Value = Duration;

    fn start(&self) -> Self::Intermediate {
        match self {
            Clock::Wall => (Instant::now(), None),
            Clock::ThreadCpu => (Instant::now(), thread_cpu_time()),
        }
    }

    fn end(&self, (wall, cpu): Self::Intermediate) -> Duration {
        match cpu.zip(thread_cpu_time()) {
            Some((start, end)) => end - start,
            None => wall.elapsed(),
        }
    }

    fn add(&self, v1: &Duration, v2: &Duration) -> Duration {
        *v1 + *v2
    }

    fn zero(&self) -> Duration {
        Duration::ZERO
    }

    fn to_f64(&self, value: &Duration) -> f64 {
        value.as_nanos() as f64
    }

    fn formatter(&self) -> &dyn criterion::measurement::ValueFormatter {
        &NanosFormatter
    }
}

/// Formats nanoseconds and byte/element rates as criterion's (private) wall-time formatter does.
struct NanosFormatter;

impl criterion::measurement::ValueFormatter for NanosFormatter {
    fn scale_values(&self, ns: f64, values: &mut [f64]) -> &'static str {
        let (factor, unit) = match ns {
            x if x < 1.0 => (1e3, "ps"),
            x if x < 1e3 => (1.0, "ns"),
            x if x < 1e6 => (1e-3, "µs"),
            x if x < 1e9 => (1e-6, "ms"),
            _ => (1e-9, "s"),
        };
        values.iter_mut().for_each(|v| *v *= factor);
        unit
    }

    fn scale_throughputs(&self, typical: f64, t: &Throughput, values: &mut [f64]) -> &'static str {
        let (per_iter, base, units): (f64, f64, [&'static str; 4]) = match *t {
            Throughput::Bytes(b) => (b as f64, 1024.0, ["  B/s", "KiB/s", "MiB/s", "GiB/s"]),
            Throughput::BytesDecimal(b) => (b as f64, 1000.0, ["  B/s", "KB/s", "MB/s", "GB/s"]),
            Throughput::Bits(b) => (b as f64, 1000.0, ["  b/s", "Kb/s", "Mb/s", "Gb/s"]),
            Throughput::Elements(e) | Throughput::ElementsAndBytes { elements: e, .. } => (
                e as f64,
                1000.0,
                [" elem/s", "Kelem/s", "Melem/s", "Gelem/s"],
            ),
        };
        let rate = per_iter * 1e9 / typical;
        let mut i = 0;
        while i < 3 && rate >= base.powi(i as i32 + 1) {
            i += 1;
        }
        let denominator = base.powi(i as i32);
        values
            .iter_mut()
            .for_each(|v| *v = per_iter * 1e9 / *v / denominator);
        units[i]
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

fn configure<M: criterion::measurement::Measurement>(g: &mut BenchmarkGroup<'_, M>, bytes: usize) {
    g.throughput(Throughput::Bytes(bytes as u64));
}

fn bench_format(c: &mut Criterion<Clock>) {
    let batches = batch_count();
    let plain = build_corpus(Compression::None, batches, 0x9E37_79B9_7F4A_7C15);
    let plain_bytes = Bytes::from(plain.buf.clone());
    cross_check(&plain, &plain_bytes);

    // Destination for the memcpy baseline, faulted in before measuring.
    let mut dst = vec![1u8; plain.buf.len()];
    let paired = Paired::from_args();
    let mut scratch = Vec::new();

    let n = plain.buf.len();
    let klog_pc = || {
        black_box(klog_parse_crc(black_box(&plain.buf)));
    };
    paired.compare(
        "parse_crc",
        ("klog", klog_pc),
        ("raw_crc32c", || {
            black_box(raw_crc32c(black_box(&plain.buf), &plain.crc_ranges));
        }),
        n,
    );
    paired.compare(
        "parse_crc",
        ("klog", klog_pc),
        ("kafka_protocol_batch_info", || {
            black_box(kp_batch_info(black_box(&plain_bytes)));
        }),
        n,
    );
    paired.compare(
        "parse_crc",
        ("klog", klog_pc),
        ("kafka_protocol", || {
            black_box(kp_decode_count(black_box(&plain_bytes)));
        }),
        n,
    );
    paired.compare(
        "records",
        ("klog", || {
            black_box(klog_records(black_box(&plain.buf), &mut scratch));
        }),
        ("kafka_protocol", || {
            black_box(kp_records(black_box(&plain_bytes)));
        }),
        n,
    );
    paired.compare(
        "records",
        ("klog", || {
            black_box(klog_records(black_box(&plain.buf), &mut scratch));
        }),
        ("memcpy", || {
            dst.copy_from_slice(black_box(&plain.buf));
            black_box(&mut dst);
        }),
        n,
    );

    {
        let mut g = c.benchmark_group("parse_crc");
        configure(&mut g, plain.buf.len());
        g.bench_function("klog", |b| b.iter(|| klog_parse_crc(black_box(&plain.buf))));
        g.bench_function("raw_crc32c", |b| {
            b.iter(|| raw_crc32c(black_box(&plain.buf), black_box(&plain.crc_ranges)))
        });
        g.bench_function("kafka_protocol", |b| {
            b.iter(|| kp_decode_count(black_box(&plain_bytes)))
        });
        g.bench_function("kafka_protocol_batch_info", |b| {
            b.iter(|| kp_batch_info(black_box(&plain_bytes)))
        });
        g.bench_function("klog_record_batch_parse", |b| {
            b.iter(|| klog_record_batch_parse(black_box(&plain.buf)))
        });
        g.bench_function("klog_without_crc", |b| {
            b.iter(|| klog_parse_no_crc(black_box(&plain.buf)))
        });
        g.finish();
    }

    {
        let mut g = c.benchmark_group("records");
        configure(&mut g, plain.buf.len());
        g.bench_function("klog", |b| {
            b.iter(|| klog_records(black_box(&plain.buf), &mut scratch))
        });
        g.bench_function("kafka_protocol", |b| {
            b.iter(|| kp_records(black_box(&plain_bytes)))
        });
        g.bench_function("memcpy", |b| {
            b.iter(|| {
                dst.copy_from_slice(black_box(&plain.buf));
                black_box(&mut dst);
            })
        });
        g.finish();
    }
    drop(plain_bytes);
    drop(plain);

    for codec in [Compression::Lz4, Compression::Zstd] {
        let corpus = build_corpus(codec, batches, 0xD1B5_4A32_D192_ED03 ^ codec.id() as u64);
        let bytes = Bytes::from(corpus.buf.clone());
        cross_check(&corpus, &bytes);
        let mut dst = vec![1u8; corpus.buf.len()];
        let group = format!("records_{}", codec.name());
        let mut scratch2 = Vec::new();
        paired.compare(
            &group,
            ("klog", || {
                black_box(klog_records(black_box(&corpus.buf), &mut scratch));
            }),
            ("kafka_protocol", || {
                black_box(kp_records(black_box(&bytes)));
            }),
            corpus.buf.len(),
        );
        paired.compare(
            &group,
            ("klog", || {
                black_box(klog_records(black_box(&corpus.buf), &mut scratch));
            }),
            ("klog_decompress_only", || {
                black_box(klog_decompress_only(black_box(&corpus), &mut scratch2));
            }),
            corpus.buf.len(),
        );
        let mut g = c.benchmark_group(group);
        // Iterations take 10-100 ms here: flat sampling keeps each benchmark within its time budget.
        g.sampling_mode(SamplingMode::Flat);
        configure(&mut g, corpus.buf.len());
        g.bench_function("klog", |b| {
            b.iter(|| klog_records(black_box(&corpus.buf), &mut scratch))
        });
        g.bench_function("kafka_protocol", |b| {
            b.iter(|| kp_records(black_box(&bytes)))
        });
        g.bench_function("klog_decompress_only", |b| {
            b.iter(|| klog_decompress_only(black_box(&corpus), &mut scratch))
        });
        g.bench_function("memcpy", |b| {
            b.iter(|| {
                dst.copy_from_slice(black_box(&corpus.buf));
                black_box(&mut dst);
            })
        });
        g.finish();
    }
}

fn config() -> Criterion<Clock> {
    Criterion::default()
        .with_measurement(Clock::from_env())
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_format
}
criterion_main!(benches);
