//! Buffered 16 KiB appends and 1 MiB sequential reads of one file, one operation in flight at a time
//! (what a partition log does), through std (pwrite/pread), klog's io_uring backend (`UringStorage`,
//! io-uring 0.7) and tokio-uring 0.5 (io-uring 0.6). Rounds alternate the order; medians of per-round
//! ratios to std are printed.
//!
//! Run: `cargo run --release -- [DIR] [MiB] [ROUNDS]` (defaults: `.`, 256, 5).

use std::path::{Path, PathBuf};
use std::time::Instant;

use klog_log::io::{open_backend, IoBackend, Storage};

const APPEND: usize = 16 << 10;
const READ: usize = 1 << 20;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// (append MB/s, read MB/s) through a klog `Storage`.
fn klog_side(storage: &dyn Storage, path: &Path, bytes: usize) -> (f64, f64) {
    let _ = std::fs::remove_file(path);
    let f = storage.create(path).unwrap();
    let data = vec![0x5au8; APPEND];
    let t = Instant::now();
    for i in 0..bytes / APPEND {
        f.write_at(&data, (i * APPEND) as u64).unwrap();
    }
    let append = bytes as f64 / t.elapsed().as_secs_f64() / 1e6;
    f.sync().unwrap();
    let mut buf = vec![0u8; READ];
    let t = Instant::now();
    let mut pos = 0u64;
    loop {
        let n = f.read_at(&mut buf, pos).unwrap();
        if n == 0 {
            break;
        }
        pos += n as u64;
    }
    let read = pos as f64 / t.elapsed().as_secs_f64() / 1e6;
    std::fs::remove_file(path).unwrap();
    (append, read)
}

fn tokio_uring_side(path: &Path, bytes: usize) -> (f64, f64) {
    let _ = std::fs::remove_file(path);
    let path = path.to_owned();
    tokio_uring::start(async move {
        let f = tokio_uring::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .await
            .unwrap();
        let mut data = vec![0x5au8; APPEND];
        let t = Instant::now();
        for i in 0..bytes / APPEND {
            let (res, buf) = f.write_at(data, (i * APPEND) as u64).submit().await;
            assert_eq!(res.unwrap(), APPEND);
            data = buf;
        }
        let append = bytes as f64 / t.elapsed().as_secs_f64() / 1e6;
        f.sync_data().await.unwrap();
        let mut buf = vec![0u8; READ];
        let t = Instant::now();
        let mut pos = 0u64;
        loop {
            let (res, b) = f.read_at(buf, pos).await;
            buf = b;
            let n = res.unwrap();
            if n == 0 {
                break;
            }
            pos += n as u64;
        }
        let read = pos as f64 / t.elapsed().as_secs_f64() / 1e6;
        f.close().await.unwrap();
        std::fs::remove_file(&path).unwrap();
        (append, read)
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = PathBuf::from(args.first().map_or(".", String::as_str));
    let bytes = args.get(1).map_or(256, |s| s.parse().unwrap()) << 20;
    let rounds: usize = args.get(2).map_or(5, |s| s.parse().unwrap());
    let path = dir.join("uring-compare.bin");
    let std_storage = open_backend(IoBackend::Std).unwrap();
    let uring = open_backend(IoBackend::Uring).expect("io_uring is not available here");
    let mut rows: Vec<[(f64, f64); 3]> = Vec::new();
    for round in 0..=rounds {
        let mut order = [0, 1, 2];
        if round % 2 == 1 {
            order.reverse();
        }
        let mut r = [(0.0, 0.0); 3];
        for side in order {
            r[side] = match side {
                0 => klog_side(&*std_storage, &path, bytes),
                1 => klog_side(&*uring, &path, bytes),
                _ => tokio_uring_side(&path, bytes),
            };
        }
        if round > 0 {
            rows.push(r); // round 0 warms up
        }
    }
    let names = [
        "std (pwrite/pread)",
        "klog UringStorage (io-uring 0.7)",
        "tokio-uring 0.5 (io-uring 0.6)",
    ];
    println!("{bytes} bytes, {rounds} rounds; medians; ratio = median of per-round ratios to std");
    for (i, name) in names.iter().enumerate() {
        let a = median(rows.iter().map(|r| r[i].0).collect());
        let ar = median(rows.iter().map(|r| r[i].0 / r[0].0).collect());
        let rd = median(rows.iter().map(|r| r[i].1).collect());
        let rr = median(rows.iter().map(|r| r[i].1 / r[0].1).collect());
        println!(
            "{name:<34} append 16 KiB {a:8.0} MB/s ({ar:.2})   read 1 MiB {rd:8.0} MB/s ({rr:.2})"
        );
    }
    let tu = median(rows.iter().map(|r| r[2].0 / r[1].0).collect());
    let tr = median(rows.iter().map(|r| r[2].1 / r[1].1).collect());
    println!("tokio-uring / klog uring: append {tu:.2}, read {tr:.2}");
}
