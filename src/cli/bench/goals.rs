//! The goal table of `klog bench`: the goals of issues #8, #17, #18, #27 and #28, each read from this
//! run's reports, printed after them and emitted as the JSON's `goals`.

use std::io::Write;

use serde_json::{json, Value};

use super::{clean, cpu, disk, mirror, recover, Report};

/// A goal of issues #8, #17, #18, #27 and #28, checked against this run's figures.
pub(super) struct Goal {
    pub(super) name: &'static str,
    /// Which figure: `report key: row / what`.
    pub(super) figure: String,
    pub(super) value: Option<f64>,
    pub(super) target: f64,
    pub(super) better: Better,
}

/// Which way a goal's figure should go.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Better {
    /// Met at or above the target (a rate, a ratio).
    Higher,
    /// Met below the target (a time).
    Lower,
    /// No target: the figure is reported for a reader to judge (the `target` is unused).
    Reported,
}

impl Goal {
    pub(super) fn met(&self) -> Option<bool> {
        let v = self.value.filter(|v| v.is_finite())?;
        match self.better {
            Better::Higher => Some(v >= self.target),
            Better::Lower => Some(v < self.target),
            Better::Reported => None,
        }
    }

    /// The verdict as the text output and report.md print it (`missed` is emphasised by the caller).
    pub(super) fn verdict(&self) -> &'static str {
        match (self.met(), self.better) {
            (Some(true), _) => "met",
            (Some(false), _) => "missed",
            (None, Better::Reported) if self.value.is_some_and(f64::is_finite) => "reported",
            (None, _) => "not measured",
        }
    }

    /// The target with its direction: `>= 0.8`, `< 1`, or `-` for a reported figure.
    pub(super) fn target_text(&self) -> String {
        match self.better {
            Better::Higher => format!(">= {}", self.target),
            Better::Lower => format!("< {}", self.target),
            Better::Reported => "-".into(),
        }
    }

    pub(super) fn to_json(&self) -> Value {
        let (target, better) = match self.better {
            Better::Higher => (Some(self.target), Some("higher")),
            Better::Lower => (Some(self.target), Some("lower")),
            Better::Reported => (None, None),
        };
        json!({
            "name": self.name,
            "figure": self.figure,
            "value": self.value.filter(|v| v.is_finite()),
            "target": target,
            "better": better,
            "met": self.met(),
        })
    }
}

pub(super) fn goals(reports: &[Report]) -> Vec<Goal> {
    let find = |key: &str| reports.iter().find(|r| r.key == key);
    let mut goals = Vec::new();
    let mut goal = |name, key: &str, figure: &str, value: Option<f64>, target| {
        if find(key).is_some() {
            goals.push(Goal {
                name,
                figure: format!("{key}: {figure}"),
                value,
                target,
                better: Better::Higher,
            });
        }
    };
    let r = |key: &str, row: &str, backend: &str| find(key).and_then(|r| r.ratio(row, backend));
    let k = |key: &str, row: &str| find(key).and_then(|r| r.kafka_ratio(row, "std"));
    let c = |key: &str, name: &str| find(key).and_then(|r| r.comparison(name));
    let leader = disk::APPEND_ROW;
    goal(
        "buffered append >= 0.9x pwrite",
        "append",
        &format!("{leader} std / limit"),
        r("append", leader, "std"),
        0.9,
    );
    goal(
        "buffered append >= 3x Kafka UnifiedLog",
        "append",
        &format!("{leader} std / Kafka"),
        k("append", leader),
        3.0,
    );
    goal(
        "buffered append of 100 B records >= 0.9x pwrite",
        "append/100B",
        &format!("{leader} std / limit"),
        r("append/100B", leader, "std"),
        0.9,
    );
    goal(
        "buffered append of 100 B records >= 2x Kafka",
        "append/100B",
        &format!("{leader} std / Kafka"),
        k("append/100B", leader),
        2.0,
    );
    // Issue #28: a group of 8 against its own bound (the same appends from one thread, 8 pwrites
    // per fdatasync), not "5x one appender", which was above that bound on every disk measured.
    let g8 = "group commit, 8 threads";
    goal(
        "group commit of 8 >= 0.9x its bound (8 pwrites + one fdatasync)",
        "durable",
        &format!("{g8} std / limit"),
        r("durable", g8, "std"),
        0.9,
    );
    let u1 = format!("uring / std, {}", disk::SINGLE_ROW);
    goal(
        "durable, one appender: io_uring >= 1.1x std",
        "durable",
        &u1,
        c("durable", &u1),
        1.1,
    );
    let u8 = "uring / std, group commit, 8 threads";
    goal(
        "group commit of 8: io_uring >= 1.5x std",
        "durable",
        u8,
        c("durable", u8),
        1.5,
    );
    let up = format!("uring / std, {}", disk::PARTITIONS_ROW);
    goal(
        "64-partition flush: io_uring >= 3x std",
        "durable/partitions",
        &up,
        c("durable/partitions", &up),
        3.0,
    );
    let seq = disk::READ_COPY_ROW;
    goal(
        "sequential reads >= 0.8x mmap + memcpy",
        "read",
        &format!("{seq} std / limit"),
        r("read", seq, "std"),
        0.8,
    );
    let rnd = disk::RANDOM_READ_ROW;
    goal(
        "random reads by offset >= 0.9x mmap + memcpy",
        "read/random-offset",
        &format!("{rnd} std / limit"),
        r("read/random-offset", rnd, "std"),
        0.9,
    );
    let rec = recover::UNCLEAN_ROW;
    goal(
        "unclean recovery >= 0.9x plain read",
        "recover",
        &format!("{rec} std / limit"),
        r("recover", rec, "std"),
        0.9,
    );
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let dir_row = recover::dir_row(cores);
    goal(
        "16-partition recovery >= 2.5x Kafka (default threads)",
        "recover/dir",
        &format!("{dir_row} / Kafka"),
        find("recover/dir").and_then(|r| r.kafka_ratio(&dir_row, "std")),
        2.5,
    );
    goal(
        "unclean recovery >= 5x Kafka LogLoader",
        "recover",
        &format!("{rec} std / Kafka"),
        k("recover", rec),
        5.0,
    );
    let psm = cpu::PSM_ROW;
    goal(
        "psm replay >= 20M batches/s",
        "psm",
        psm,
        find("psm")
            .and_then(|r| r.row(psm, "-"))
            .map(|r| r.series.median() / 1e6),
        20.0,
    );
    goal(
        "psm replay >= 5x Kafka ProducerStateManager",
        "psm",
        &format!("{psm} / Kafka"),
        find("psm").and_then(|r| r.kafka_ratio(psm, "-")),
        5.0,
    );
    let m = mirror::MIRROR_ROW;
    goal(
        "mirroring >= 0.8x the append of its fetches",
        "mirror",
        &format!("{m} std / limit"),
        r("mirror", m, "std"),
        0.8,
    );
    let parse = cpu::PARSE_ROW;
    goal(
        "parse + CRC >= 0.8x raw CRC-32C",
        "parse",
        &format!("{parse} / limit"),
        r("parse", parse, "-"),
        0.8,
    );
    goals.extend(cluster_scale_goals(find("mirror/partitions")));
    goals.extend(clean_goals(find("clean")));
    goals
}

/// Issue #17's goals, from `mirror/partitions` when it ran: the mirror of every partition beside its
/// bound (the follower append of the same fetched sets into the same partitions, issue #28), the failover of all of them (lower is better), and the peak RSS
/// per partition (reported: whether it is state or buffers is for the reader of both counts).
fn cluster_scale_goals(report: Option<&Report>) -> Vec<Goal> {
    let Some(report) = report else {
        return Vec::new();
    };
    let key = "mirror/partitions";
    let n = report.extra["partitions"].as_u64().unwrap_or(0);
    let std_failover = report.extra["failover"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["backend"] == "std"));
    let m = mirror::MANY_ROW;
    vec![
        Goal {
            name: "mirror at cluster scale >= 0.8x follower append",
            figure: format!("{key}: {m}, {n} partitions, std / limit"),
            value: report.ratio(m, "std"),
            target: 0.8,
            better: Better::Higher,
        },
        Goal {
            name: "failover of every partition at once < 1 s",
            figure: format!("{key}: failover of {n} partitions, std, seconds"),
            value: std_failover.and_then(|f| f["s"].as_f64()),
            target: 1.0,
            better: Better::Lower,
        },
        Goal {
            name: "mirror peak RSS per partition (KiB)",
            figure: format!("{key}: details.rss.per_partition_kib"),
            value: report.extra["rss"]["per_partition_kib"].as_f64(),
            target: 0.0,
            better: Better::Reported,
        },
    ]
}

/// Issue #27's goals, from `clean` when it ran: klog's pass beside Kafka's `Cleaner` on the same bytes
/// and beside a plain read of them, and the pass's peak RSS growth over the dedupe buffer plus the fixed
/// cost (`clean::FIXED_COST_BYTES`), met below 1.
fn clean_goals(report: Option<&Report>) -> Vec<Goal> {
    const _: () = assert!(clean::FIXED_COST_BYTES == 32 << 20);
    let Some(report) = report else {
        return Vec::new();
    };
    let row = clean::CLEAN_ROW;
    vec![
        Goal {
            name: "cleaning >= 2x Kafka's Cleaner on the same bytes",
            figure: format!("clean: {row} std / Kafka"),
            value: report.kafka_ratio(row, "std"),
            target: 2.0,
            better: Better::Higher,
        },
        Goal {
            name: "cleaning >= 0.5x a plain read of the same bytes",
            figure: format!("clean: {row} std / limit"),
            value: report.ratio(row, "std"),
            target: 0.5,
            better: Better::Higher,
        },
        Goal {
            // The name states clean::FIXED_COST_BYTES (asserted below).
            name: "clean peak RSS growth / (dedupe buffer + 32 MiB)",
            figure: "clean: details.rss.growth_over_budget".into(),
            value: report.extra["rss"]["growth_over_budget"].as_f64(),
            target: 1.0,
            better: Better::Lower,
        },
    ]
}

pub(super) fn print_goals(out: &mut impl Write, goals: &[Goal]) -> std::io::Result<()> {
    if goals.is_empty() {
        return Ok(());
    }
    writeln!(out, "goals (issues #8, #17, #18, #27, #28):")?;
    for g in goals {
        let verdict = match g.verdict() {
            "missed" => "MISSED",
            v => v,
        };
        let value = g.value.map_or("-".into(), |v| format!("{v:.2}"));
        writeln!(
            out,
            "  {:<50} {:>8} (target {:>6})  {verdict:<12}  {}",
            g.name,
            value,
            g.target_text(),
            g.figure
        )?;
    }
    writeln!(out)
}
