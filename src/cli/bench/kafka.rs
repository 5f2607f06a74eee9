//! Kafka's side of `klog bench`: runs `interop/bench/kafka-bench.sh` (Apache Kafka's own storage code in
//! a JVM, after warm-up rounds) and reads the JSON line it prints. Where Java or the harness is absent the
//! Kafka column says so; nothing is guessed.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use super::{BenchArgs, Ctx, Kafka, Report, Series};
/// Whether and how Kafka's side can run.
pub(super) struct KafkaSide {
    script: PathBuf,
    absent: Option<String>,
}

fn java_works() -> bool {
    let java = std::env::var_os("KLOG_JAVA")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("JAVA_HOME").map(|h| PathBuf::from(h).join("bin/java")))
        .unwrap_or_else(|| PathBuf::from("java"));
    Command::new(java)
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl KafkaSide {
    pub fn detect(args: &BenchArgs) -> Self {
        let script = args.kafka_bench.clone().unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/interop/bench/kafka-bench.sh"
            ))
        });
        let absent = if args.no_kafka {
            Some("--no-kafka".to_owned())
        } else if !script.is_file() {
            Some(format!("no Kafka harness at {}", script.display()))
        } else if !java_works() {
            Some("no Java found (KLOG_JAVA, JAVA_HOME or java on PATH)".to_owned())
        } else {
            None
        };
        KafkaSide { script, absent }
    }

    pub fn absent_reason(&self) -> Option<&str> {
        self.absent.as_deref()
    }

    pub fn describe(&self) -> Value {
        match &self.absent {
            Some(why) => json!({"status": "absent", "reason": why}),
            None => json!({"status": "available", "script": self.script.display().to_string()}),
        }
    }

    /// Runs `kafka-bench.sh run ARGS...`; `what` names Kafka's operation in the tables.
    pub fn run(&self, what: &str, args: &[String]) -> Kafka {
        if let Some(why) = &self.absent {
            return Kafka::Absent(why.clone());
        }
        let out = match Command::new(&self.script)
            .arg("run")
            .args(args)
            .stdin(Stdio::null())
            .output()
        {
            Ok(out) => out,
            Err(e) => return Kafka::Failed(format!("{}: {e}", self.script.display())),
        };
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
            return Kafka::Failed(format!(
                "{} exited with {}: {}",
                self.script.display(),
                out.status,
                tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
            ));
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let Some(doc) = stdout
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str::<Value>(l).ok())
        else {
            return Kafka::Failed(format!("no JSON line in the output: {stdout}"));
        };
        let runs: Vec<f64> = doc["runs"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        if runs.is_empty() {
            return Kafka::Failed(format!("no runs in {doc}"));
        }
        Kafka::Measured {
            what: what.to_owned(),
            version: doc["kafka_version"].as_str().unwrap_or("?").to_owned(),
            warmup_rounds: doc["warmup_rounds"].as_u64().unwrap_or(0),
            series: Series { runs },
            details: doc["details"].clone(),
        }
    }
}

/// Kafka's figure for `threads` appenders from a `durable` run (its `details.groups`), or why there is
/// none.
pub(super) fn durable_group(run: &Kafka, threads: usize) -> Kafka {
    let Kafka::Measured {
        version,
        warmup_rounds,
        details,
        ..
    } = run
    else {
        return match run {
            Kafka::Absent(why) => Kafka::Absent(why.clone()),
            Kafka::Failed(why) => Kafka::Failed(why.clone()),
            _ => Kafka::NotMeasured,
        };
    };
    let runs: Vec<f64> = details["groups"][threads.to_string()]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    if runs.is_empty() {
        return Kafka::Failed(format!("no runs for {threads} appenders in {details}"));
    }
    Kafka::Measured {
        what: format!("{threads} appenders: appendAsLeader + flushUptoOffsetExclusive"),
        version: version.clone(),
        warmup_rounds: *warmup_rounds,
        series: Series { runs },
        details: Value::Null,
    }
}

/// Kafka's side of `durable`: `n` appends of `batch`, each followed by `flushUptoOffsetExclusive`, by one
/// appender (the report's Kafka figure) and by each group of `--threads` appenders sharing the log (the
/// figure of the row `row_name(threads)`, every backend's).
pub(super) fn durable(
    ctx: &Ctx,
    report: &mut Report,
    batch: &[u8],
    n: u64,
    row_name: impl Fn(usize) -> String,
) -> anyhow::Result<()> {
    ctx.progress
        .say("durable: Kafka appendAsLeader + flushUptoOffsetExclusive");
    let file = ctx.scratch.join("kafka-batches.bin");
    std::fs::write(&file, batch)?;
    let mut counts = vec![1];
    counts.extend(ctx.args.threads.iter().copied().filter(|&t| t != 1));
    let list: Vec<String> = counts.iter().map(usize::to_string).collect();
    let run = ctx.kafka.run(
        "appendAsLeader + flushUptoOffsetExclusive, one appender",
        &[
            "durable".into(),
            file.display().to_string(),
            n.to_string(),
            ctx.rounds().to_string(),
            "1".into(),
            ctx.scratch.join("kafka").display().to_string(),
            ctx.args.segment_bytes.min(i32::MAX as u64).to_string(),
            list.join(","),
        ],
    );
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_dir_all(ctx.scratch.join("kafka"));
    for &t in ctx.args.threads.iter() {
        let name = row_name(t);
        for row in report.rows.iter_mut().filter(|r| r.name == name) {
            row.kafka = Some(durable_group(&run, t));
        }
    }
    report.kafka = run;
    Ok(())
}
