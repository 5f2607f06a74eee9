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
    /// For a goal "klog / Kafka >= T" whose report has the row's limit: limit / Kafka, the best klog /
    /// Kafka any implementation held to that limit can reach.
    pub(super) ceiling: Option<f64>,
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

    /// Missed, with a target above the ceiling: no implementation held to the row's limit meets it.
    pub(super) fn beyond_bound(&self) -> bool {
        let ceiling = self.ceiling.filter(|c| c.is_finite());
        self.met() == Some(false) && ceiling.is_some_and(|c| self.target > c)
    }

    /// The ceiling as the tables print it, `-` where the goal has none.
    pub(super) fn ceiling_text(&self) -> String {
        self.ceiling
            .filter(|c| c.is_finite())
            .map_or("-".into(), |c| format!("{c:.2}"))
    }

    /// The verdict as the text output and report.md print it (`missed` is emphasised by the caller).
    pub(super) fn verdict(&self) -> &'static str {
        match (self.met(), self.better) {
            (Some(true), _) => "met",
            (Some(false), _) if self.beyond_bound() => "beyond the bound",
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
            "ceiling": self.ceiling.filter(|c| c.is_finite()),
            "beyond_bound": self.beyond_bound(),
        })
    }
}

/// A goal's figure from its report: (value, ceiling).
type Figure = (Option<f64>, Option<f64>);

pub(super) fn goals(reports: &[Report]) -> Vec<Goal> {
    let find = |key: &str| reports.iter().find(|r| r.key == key);
    let mut goals = Vec::new();
    // Each figure is (value, ceiling): only a klog / Kafka figure has a ceiling (limit / Kafka).
    let mut goal = |name, key: &str, figure: &str, (value, ceiling): Figure, target| {
        if find(key).is_some() {
            goals.push(Goal {
                name,
                figure: format!("{key}: {figure}"),
                value,
                target,
                better: Better::Higher,
                ceiling,
            });
        }
    };
    let r =
        |key: &str, row: &str, backend: &str| (find(key).and_then(|r| r.ratio(row, backend)), None);
    let k = |key: &str, row: &str, backend: &str| {
        find(key).map_or((None, None), |r| {
            (r.kafka_ratio(row, backend), r.ceiling(row, backend))
        })
    };
    let c = |key: &str, name: &str| (find(key).and_then(|r| r.comparison(name)), None);
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
        k("append", leader, "std"),
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
        k("append/100B", leader, "std"),
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
        k("recover/dir", &dir_row, "std"),
        2.5,
    );
    goal(
        "unclean recovery >= 5x Kafka LogLoader",
        "recover",
        &format!("{rec} std / Kafka"),
        k("recover", rec, "std"),
        5.0,
    );
    let psm = cpu::PSM_ROW;
    goal(
        "psm replay >= 20M batches/s",
        "psm",
        psm,
        (
            find("psm")
                .and_then(|r| r.row(psm, "-"))
                .map(|r| r.series.median() / 1e6),
            None,
        ),
        20.0,
    );
    goal(
        "psm replay >= 5x Kafka ProducerStateManager",
        "psm",
        &format!("{psm} / Kafka"),
        k("psm", psm, "-"),
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
            ceiling: None,
        },
        Goal {
            name: "failover of every partition at once < 1 s",
            figure: format!("{key}: failover of {n} partitions, std, seconds"),
            value: std_failover.and_then(|f| f["s"].as_f64()),
            target: 1.0,
            better: Better::Lower,
            ceiling: None,
        },
        Goal {
            name: "mirror peak RSS per partition (KiB)",
            figure: format!("{key}: details.rss.per_partition_kib"),
            value: report.extra["rss"]["per_partition_kib"].as_f64(),
            target: 0.0,
            better: Better::Reported,
            ceiling: None,
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
            ceiling: report.ceiling(row, "std"),
        },
        Goal {
            name: "cleaning >= 0.5x a plain read of the same bytes",
            figure: format!("clean: {row} std / limit"),
            value: report.ratio(row, "std"),
            target: 0.5,
            better: Better::Higher,
            ceiling: None,
        },
        Goal {
            // The name states clean::FIXED_COST_BYTES (asserted below).
            name: "clean peak RSS growth / (dedupe buffer + 32 MiB)",
            figure: "clean: details.rss.growth_over_budget".into(),
            value: report.extra["rss"]["growth_over_budget"].as_f64(),
            target: 1.0,
            better: Better::Lower,
            ceiling: None,
        },
    ]
}

pub(super) fn print_goals(out: &mut impl Write, goals: &[Goal]) -> std::io::Result<()> {
    if goals.is_empty() {
        return Ok(());
    }
    writeln!(out, "goals (issues #8, #17, #18, #27, #28):")?;
    // The ceiling of a klog / Kafka goal is limit / Kafka: a target above it is beyond the bound.
    writeln!(
        out,
        "  {:<50} {:>8}  {:>9}  {:>7}  {:<16}  figure",
        "goal", "value", "target", "ceiling", "verdict"
    )?;
    for g in goals {
        let verdict = match g.verdict() {
            "missed" => "MISSED",
            v => v,
        };
        let value = g.value.map_or("-".into(), |v| format!("{v:.2}"));
        writeln!(
            out,
            "  {:<50} {:>8}  {:>9}  {:>7}  {verdict:<16}  {}",
            g.name,
            value,
            g.target_text(),
            g.ceiling_text(),
            g.figure
        )?;
    }
    writeln!(out)
}

#[cfg(test)]
mod tests {
    use super::super::{Bound, Kafka, Row, Series};
    use super::*;

    fn series(v: f64) -> Series {
        Series {
            runs: vec![v, v, v],
        }
    }

    fn kafka(v: f64) -> Kafka {
        Kafka::Measured {
            what: "the same work".into(),
            version: "4.4.0".into(),
            warmup_rounds: 0,
            series: series(v),
            details: Value::Null,
        }
    }

    /// A report of one std row: `limit` the report's baseline, `bound` the row's own (if any).
    fn report(key: &str, row: &str, limit: f64, klog: f64, bound: Option<f64>, k: Kafka) -> Report {
        let mut r = Report::new(key, key.into(), "MB/s");
        r.baseline = series(limit);
        r.rows.push(Row {
            name: row.into(),
            backend: "std",
            series: series(klog),
            bound: bound.map(|b| Bound {
                name: "the row's own bound".into(),
                series: series(b),
            }),
            kafka: None,
        });
        r.kafka = k;
        r
    }

    fn find<'a>(goals: &'a [Goal], name: &str) -> &'a Goal {
        goals
            .iter()
            .find(|g| g.name == name)
            .unwrap_or_else(|| panic!("no goal {name}"))
    }

    fn made_up() -> Vec<Goal> {
        let leader = disk::APPEND_ROW;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        goals(&[
            // klog 0.9 of pwrite, 1.5x Kafka; Kafka at 0.6 of pwrite: the ceiling is 1.67 < 3.
            report("append", leader, 1000.0, 900.0, None, kafka(600.0)),
            // 2.67x Kafka, goal 2: met (ceiling 3.33).
            report("append/100B", leader, 1000.0, 800.0, None, kafka(300.0)),
            // 3x Kafka, goal 5, ceiling 10: missed, within the bound.
            report(
                "recover",
                recover::UNCLEAN_ROW,
                1000.0,
                300.0,
                None,
                kafka(100.0),
            ),
            // The row's own bound (2000) is its limit, not the report's baseline (1000): ceiling 4,
            // so 1.8x against a goal of 2.5 is missed, not beyond.
            report(
                "recover/dir",
                &recover::dir_row(cores),
                1000.0,
                900.0,
                Some(2000.0),
                kafka(500.0),
            ),
            // No Kafka: no ratio, no ceiling.
            report(
                "psm",
                cpu::PSM_ROW,
                30e6,
                25e6,
                None,
                Kafka::Absent("--no-kafka".into()),
            ),
        ])
    }

    #[test]
    fn a_kafka_goal_carries_limit_over_kafka_as_its_ceiling() {
        let goals = made_up();
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-9);

        let beyond = find(&goals, "buffered append >= 3x Kafka UnifiedLog");
        assert!(close(beyond.value, 1.5) && close(beyond.ceiling, 1000.0 / 600.0));
        assert_eq!(beyond.met(), Some(false));
        assert!(beyond.beyond_bound());
        assert_eq!(beyond.verdict(), "beyond the bound");

        let met = find(&goals, "buffered append of 100 B records >= 2x Kafka");
        assert!(close(met.ceiling, 1000.0 / 300.0));
        assert!(!met.beyond_bound());
        assert_eq!(met.verdict(), "met");

        let missed = find(&goals, "unclean recovery >= 5x Kafka LogLoader");
        assert!(close(missed.value, 3.0) && close(missed.ceiling, 10.0));
        assert!(!missed.beyond_bound());
        assert_eq!(missed.verdict(), "missed");

        let own = find(
            &goals,
            "16-partition recovery >= 2.5x Kafka (default threads)",
        );
        assert!(close(own.value, 1.8) && close(own.ceiling, 4.0));
        assert_eq!(own.verdict(), "missed");

        // A klog / limit goal has no ceiling; a Kafka goal without Kafka has neither value nor one.
        let limit = find(&goals, "buffered append >= 0.9x pwrite");
        assert!(close(limit.value, 0.9) && limit.ceiling.is_none());
        assert_eq!(limit.verdict(), "met");
        let absent = find(&goals, "psm replay >= 5x Kafka ProducerStateManager");
        assert!(absent.value.is_none() && absent.ceiling.is_none());
        assert_eq!(absent.verdict(), "not measured");
    }

    #[test]
    fn the_ceiling_and_the_verdict_reach_the_json_and_the_text() {
        let goals = made_up();
        let json = |name: &str| find(&goals, name).to_json();
        let beyond = json("buffered append >= 3x Kafka UnifiedLog");
        assert_eq!(beyond["met"], false);
        assert_eq!(beyond["beyond_bound"], true);
        assert!((beyond["ceiling"].as_f64().unwrap() - 1000.0 / 600.0).abs() < 1e-9);
        let missed = json("unclean recovery >= 5x Kafka LogLoader");
        assert_eq!(
            (&missed["met"], &missed["beyond_bound"]),
            (&false.into(), &false.into())
        );
        let limit = json("buffered append >= 0.9x pwrite");
        assert!(limit["ceiling"].is_null() && limit["beyond_bound"] == false);

        let mut out = Vec::new();
        print_goals(&mut out, &goals).unwrap();
        let text = String::from_utf8(out).unwrap();
        let line = |name: &str| {
            text.lines()
                .find(|l| l.trim_start().starts_with(name))
                .unwrap_or_else(|| panic!("no line {name} in {text}"))
                .to_owned()
        };
        assert!(
            text.lines().nth(1).is_some_and(|h| h.contains("ceiling")),
            "{text}"
        );
        let beyond = line("buffered append >= 3x Kafka UnifiedLog");
        assert!(
            beyond.contains(" 1.67 ") && beyond.contains("beyond the bound"),
            "{beyond}"
        );
        let missed = line("unclean recovery >= 5x Kafka LogLoader");
        assert!(
            missed.contains(" 10.00 ") && missed.contains("MISSED"),
            "{missed}"
        );
    }
}
