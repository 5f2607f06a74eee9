//! The fuzz targets on stable Rust: every seed, corpus entry, crash artifact and regression under `fuzz/` is
//! replayed through its target, and each seed is mutated a few thousand times with a seeded xorshift, so CI
//! exercises the parsers without nightly or libFuzzer. The target bodies are `fuzz/src/lib.rs` itself.
//!
//! `KLOG_FUZZ_MUTATIONS=N` changes the number of mutations per seed (default 2000);
//! `KLOG_SEED=S` changes the xorshift seed. A failing input is printed as hex with its target, to be saved
//! under `fuzz/regressions/<target>/`.

#[path = "../fuzz/src/lib.rs"]
#[allow(dead_code)]
mod fuzz_targets;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Once;

use fuzz_targets::{seeds, Target, TARGETS};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// Sorted regular files of `dir`; none when it does not exist.
fn files_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("readable directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// `fuzz/<kind>/<target>/*` for every target directory present; a directory named after no target fails.
fn stored_inputs(kind: &str) -> Vec<(&'static str, PathBuf)> {
    let root = fuzz_dir().join(kind);
    let Ok(entries) = std::fs::read_dir(&root) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .map(|e| e.expect("readable directory entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let mut inputs = Vec::new();
    for dir in dirs {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let (target, _) = TARGETS
            .iter()
            .find(|(t, _)| *t == name)
            .unwrap_or_else(|| panic!("{} is named after no fuzz target", dir.display()));
        inputs.extend(files_in(&dir).into_iter().map(|f| (*target, f)));
    }
    inputs
}

fn target_fn(name: &str) -> Target {
    fuzz_targets::target(name).unwrap_or_else(|| panic!("no target {name}"))
}

thread_local! {
    /// Set while `run_caught` runs: the panic hook records the message here instead of printing it.
    static CAUGHT: RefCell<Option<Option<String>>> = const { RefCell::new(None) };
}

/// Runs a target on one input; a panic becomes `Err(message at location)`.
fn run_caught(target: Target, data: &[u8]) -> Result<(), String> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let captured = CAUGHT.with(|c| {
                let mut c = c.borrow_mut();
                match c.as_mut() {
                    Some(slot) => {
                        *slot = Some(info.to_string());
                        true
                    }
                    None => false,
                }
            });
            if !captured {
                default(info);
            }
        }));
    });
    CAUGHT.with(|c| *c.borrow_mut() = Some(None));
    let result = panic::catch_unwind(AssertUnwindSafe(|| target(data)));
    let message = CAUGHT.with(|c| c.borrow_mut().take()).flatten();
    result.map_err(|_| message.unwrap_or_else(|| "panic without a message".into()))
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

/// Failures as one readable report: target, input (hex), panic.
fn report(failures: &[(String, Vec<u8>, String)]) -> String {
    failures
        .iter()
        .map(|(what, data, msg)| {
            format!(
                "\n--- {what} ({} bytes)\n    input: {}\n    {msg}",
                data.len(),
                hex(data)
            )
        })
        .collect()
}

/// The seeds of one target: the committed files plus the generator's current output.
fn seeds_of(target: &str) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = files_in(&fuzz_dir().join("seeds").join(target))
        .iter()
        .map(|p| std::fs::read(p).expect("readable seed"))
        .collect();
    for s in seeds::all() {
        if s.target == target && !out.contains(&s.bytes) {
            out.push(s.bytes);
        }
    }
    out
}

#[test]
fn every_target_has_committed_seeds_matching_the_generator() {
    let generated = seeds::all();
    for (target, _) in TARGETS {
        let dir = fuzz_dir().join("seeds").join(target);
        let on_disk: Vec<String> = files_in(&dir)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        let expected: Vec<String> = generated
            .iter()
            .filter(|s| s.target == *target)
            .map(|s| s.name.clone())
            .collect();
        assert!(!expected.is_empty(), "{target}: the generator has no seeds");
        for name in &expected {
            assert!(
                on_disk.contains(name),
                "{target}: seed {name} is not in {} (KLOG_WRITE_SEEDS=1 cargo test --test fuzz_corpus write_seeds)",
                dir.display()
            );
        }
    }
}

#[test]
fn seeds_replay_through_their_targets() {
    let mut failures = Vec::new();
    let mut counts = BTreeMap::new();
    for (target, f) in TARGETS {
        for data in seeds_of(target) {
            if let Err(msg) = run_caught(*f, &data) {
                failures.push((format!("seed of {target}"), data, msg));
            }
            *counts.entry(*target).or_insert(0usize) += 1;
        }
    }
    assert!(failures.is_empty(), "seeds failed:{}", report(&failures));
    for (target, _) in TARGETS {
        assert!(
            counts.get(target).copied().unwrap_or(0) > 0,
            "{target}: no seeds replayed"
        );
    }
}

/// The seeds are meant to reach deep: each must parse, not just be rejected somewhere on the surface.
#[test]
fn seeds_are_accepted_by_the_parsers() {
    use klog_log::format::{Batches, Compression, LegacyEntry, RecordBatch};
    for s in seeds::all() {
        let what = format!("{}/{}", s.target, s.name);
        match s.target {
            "batch_parse" => {
                let (b, rest) =
                    RecordBatch::parse(&s.bytes, 0).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(rest.is_empty(), "{what}");
                let mut scratch = Vec::new();
                let n = b
                    .records(&mut scratch)
                    .unwrap_or_else(|e| panic!("{what}: {e}"))
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap_or_else(|e| panic!("{what}: {e}"))
                    .len();
                assert_eq!(n as i32, b.records_count(), "{what}");
                if b.is_control() {
                    assert!(b
                        .control_record()
                        .unwrap_or_else(|e| panic!("{what}: {e}"))
                        .is_some());
                }
            }
            "batches_iter" => {
                let ok = Batches::new(&s.bytes).take_while(Result::is_ok).count();
                assert!(ok >= 1, "{what}: no batch read");
            }
            "legacy" => {
                let (e, rest) =
                    LegacyEntry::parse(&s.bytes, 0).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(rest.is_empty(), "{what}");
                let mut scratch = Vec::new();
                let records = e
                    .records(&mut scratch)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let expected = if e.attributes & 0x07 == 0 { 1 } else { 3 };
                assert_eq!(records.len(), expected, "{what}");
                if e.attributes & 0x07 != 0 {
                    assert_eq!(
                        records.last().unwrap().offset,
                        e.offset,
                        "{what}: wrapper offset is the last"
                    );
                }
            }
            t if t.starts_with("codec_") => {
                let codec = Compression::from_name(&t["codec_".len()..]).expect("a codec");
                let mut out = Vec::new();
                codec
                    .decompress(&s.bytes, &mut out, fuzz_targets::LIMIT)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                if s.name == "raw_block" {
                    assert_eq!(out, b"abcdabcdabcdabcd", "{what}");
                }
                // gzip members, xerial streams and zstd frames are read on; LZ4 stops after its first
                // frame's end mark (as Kafka's KafkaLZ4BlockInputStream does) and ignores the rest.
                if s.name == "two_streams" {
                    let expected: &[u8] = if codec == Compression::Lz4 {
                        b"first "
                    } else {
                        b"first second"
                    };
                    assert_eq!(out, expected, "{what}");
                }
            }
            _ => {}
        }
    }
}

#[test]
fn stored_corpus_and_artifacts_replay() {
    // Both are gitignored: present only where `scripts/fuzz.sh` ran. Artifacts are crashes: replaying them
    // fails until the parser is fixed, which is the point.
    let mut failures = Vec::new();
    for kind in ["corpus", "artifacts"] {
        for (target, path) in stored_inputs(kind) {
            let data = std::fs::read(&path).expect("readable input");
            if let Err(msg) = run_caught(target_fn(target), &data) {
                failures.push((path.display().to_string(), data, msg));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "stored inputs failed:{}",
        report(&failures)
    );
}

#[test]
fn regressions_replay() {
    let inputs = stored_inputs("regressions");
    let mut failures = Vec::new();
    for (target, path) in &inputs {
        let data = std::fs::read(path).expect("readable regression");
        if let Err(msg) = run_caught(target_fn(target), &data) {
            failures.push((path.display().to_string(), data, msg));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} regressions still fail:{}",
        failures.len(),
        inputs.len(),
        report(&failures)
    );
}

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const INTERESTING_32: [i32; 9] = [0, -1, 1, 14, 48, 49, i32::MAX, i32::MIN, 0x7f];
const INTERESTING_64: [i64; 6] = [0, -1, 1, i64::MAX, i64::MIN, i64::MAX - 1];

/// One to four libFuzzer-style edits: bit flips, byte sets, interesting integers, inserts, deletes,
/// duplicated ranges, truncation, a splice with another seed of the target.
fn mutate(rng: &mut Rng, seed: &[u8], others: &[Vec<u8>]) -> Vec<u8> {
    let mut d = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(d.len().max(1));
        match rng.below(10) {
            0 if !d.is_empty() => d[at] ^= 1 << rng.below(8),
            1 if !d.is_empty() => d[at] = rng.next() as u8,
            2 if !d.is_empty() => d[at] = [0x00, 0x01, 0x7f, 0x80, 0xff][rng.below(5)],
            3 if d.len() >= at + 4 => {
                let v = INTERESTING_32[rng.below(INTERESTING_32.len())];
                d[at..at + 4].copy_from_slice(&v.to_be_bytes());
            }
            4 if d.len() >= at + 8 => {
                let v = INTERESTING_64[rng.below(INTERESTING_64.len())];
                d[at..at + 8].copy_from_slice(&v.to_be_bytes());
            }
            5 => d.insert(at.min(d.len()), rng.next() as u8),
            6 if !d.is_empty() => {
                let n = 1 + rng.below(16.min(d.len() - at));
                d.drain(at..at + n);
            }
            7 if !d.is_empty() => {
                let n = 1 + rng.below(32.min(d.len() - at));
                let copy = d[at..at + n].to_vec();
                let to = rng.below(d.len() + 1);
                d.splice(to..to, copy);
            }
            8 => d.truncate(at),
            _ if !others.is_empty() => {
                let other = &others[rng.below(others.len())];
                let from = rng.below(other.len().max(1)).min(other.len());
                d.truncate(at);
                d.extend_from_slice(&other[from..]);
            }
            _ => {}
        }
    }
    d
}

#[test]
fn seed_mutations_never_panic() {
    let per_seed: usize = std::env::var("KLOG_FUZZ_MUTATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let start: u64 = std::env::var("KLOG_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x6b6c_6f67_6675_7a7a);
    let mut failures = Vec::new();
    let mut executed = 0usize;
    for (i, (target, f)) in TARGETS.iter().enumerate() {
        let started = std::time::Instant::now();
        let seeds = seeds_of(target);
        assert!(!seeds.is_empty(), "{target}: no seeds to mutate");
        let mut rng = Rng(start ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut failed_here = 0;
        'seeds: for seed in &seeds {
            for _ in 0..per_seed {
                let data = mutate(&mut rng, seed, &seeds);
                executed += 1;
                if let Err(msg) = run_caught(*f, &data) {
                    failures.push((format!("mutation of a {target} seed"), data, msg));
                    failed_here += 1;
                    // A few distinct inputs per target are enough to diagnose; keep the report short.
                    if failed_here == 3 {
                        break 'seeds;
                    }
                }
            }
        }
        eprintln!(
            "{target}: {} seeds x {per_seed} mutations in {:.1?}",
            seeds.len(),
            started.elapsed()
        );
    }
    assert!(executed > 0);
    assert!(
        failures.is_empty(),
        "{} mutated inputs failed (save them under fuzz/regressions/<target>/):{}",
        failures.len(),
        report(&failures)
    );
}

/// The committed seeds are exactly what the generator makes; with `KLOG_WRITE_SEEDS=1`
/// (`KLOG_WRITE_SEEDS=1 cargo test --test fuzz_corpus write_seeds`) it rewrites `fuzz/seeds/` instead.
#[test]
fn write_seeds() {
    if std::env::var_os("KLOG_WRITE_SEEDS").is_none() {
        let root = fuzz_dir().join("seeds");
        let generated = seeds::all();
        assert!(!generated.is_empty());
        for s in generated {
            let path = root.join(s.target).join(&s.name);
            let on_disk = std::fs::read(&path)
                .unwrap_or_else(|e| panic!("{}: {e} (regenerate the seeds)", path.display()));
            assert_eq!(
                on_disk,
                s.bytes,
                "{} differs from the generator (regenerate the seeds)",
                path.display()
            );
        }
        return;
    }
    let root = fuzz_dir().join("seeds");
    for (target, _) in TARGETS {
        let dir = root.join(target);
        for stale in files_in(&dir) {
            std::fs::remove_file(stale).expect("remove stale seed");
        }
        std::fs::create_dir_all(&dir).expect("create seed directory");
    }
    for s in seeds::all() {
        std::fs::write(root.join(s.target).join(&s.name), &s.bytes).expect("write seed");
    }
}
