//! What the criterion benches share for their paired ratios: reading criterion's command line (test mode,
//! `--quick`, filters), the thread's CPU time, and timing two functions back to back in alternating order.
//! Each bench prints its own `paired/...` lines from the samples.
#![allow(dead_code)] // each bench uses its own subset

use std::time::Duration;

/// Criterion's command line as the paired ratios need it.
pub struct CriterionArgs {
    args: Vec<String>,
    /// The non-option arguments: criterion's filters (substrings of benchmark ids).
    pub filters: Vec<String>,
}

/// Criterion options that take a value: the value is not a filter.
const VALUED: [&str; 17] = [
    "--save-baseline",
    "-s",
    "--baseline",
    "-b",
    "--baseline-lenient",
    "--load-baseline",
    "--color",
    "-c",
    "--format",
    "--sample-size",
    "--warm-up-time",
    "--measurement-time",
    "--nresamples",
    "--noise-threshold",
    "--confidence-level",
    "--significance-level",
    "--profile-time",
];

impl CriterionArgs {
    pub fn from_env() -> Self {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let mut filters = Vec::new();
        let mut skip_next = false;
        for a in &args {
            if std::mem::take(&mut skip_next) {
                continue;
            }
            if a.starts_with('-') {
                skip_next = VALUED.contains(&a.as_str());
            } else {
                filters.push(a.clone());
            }
        }
        CriterionArgs { args, filters }
    }

    pub fn has(&self, flag: &str) -> bool {
        self.args.iter().any(|a| a == flag)
    }

    pub fn profiling(&self) -> bool {
        self.args.iter().any(|a| a.starts_with("--profile-time"))
    }

    /// Paired rounds to run: none when listing, profiling or `KLOG_BENCH_PAIRED=0`; one in test mode
    /// (`cargo test --benches`, not a measurement); `quick` with `--quick`; else `full`.
    pub fn paired_rounds(&self, full: usize, quick: usize) -> usize {
        if std::env::var("KLOG_BENCH_PAIRED").is_ok_and(|v| v == "0")
            || self.has("--list")
            || self.profiling()
        {
            0
        } else if !self.has("--bench") || self.has("--test") {
            1
        } else if self.has("--quick") {
            quick
        } else {
            full
        }
    }

    /// Whether a paired line `id` runs: some rounds, and no filter or a filter it contains.
    pub fn selected(&self, rounds: usize, id: &str) -> bool {
        rounds > 0
            && (self.filters.is_empty() || self.filters.iter().any(|f| id.contains(f.as_str())))
    }
}

/// CPU time consumed by the calling thread (user + system), or `None` where not implemented. Unlike wall
/// time it does not advance while other processes hold the CPU.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
pub fn thread_cpu_time() -> Option<Duration> {
    #[repr(C)]
    struct Timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clock_id: i32, tp: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec with the layout of 64-bit Linux's `struct timespec`.
    let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
pub fn thread_cpu_time() -> Option<Duration> {
    None
}

/// Runs `a` then `b` on even rounds and `b` then `a` on odd ones, so that a drift of the machine hits both
/// sides alike; returns each round's (a, b).
pub fn alternating<X>(
    rounds: usize,
    mut a: impl FnMut() -> X,
    mut b: impl FnMut() -> X,
) -> Vec<(X, X)> {
    (0..rounds)
        .map(|round| {
            if round % 2 == 0 {
                let x = a();
                (x, b())
            } else {
                let y = b();
                (a(), y)
            }
        })
        .collect()
}

/// (first quartile, median, third quartile) of `v` (nearest rank).
pub fn quartiles(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    (at(0.25), at(0.5), at(0.75))
}
