//! Kafka's side of `klog bench`: runs `interop/bench/kafka-bench.sh` (Apache Kafka's own storage code in
//! a JVM, after warm-up rounds) and reads the JSON line it prints. Where Java or the harness is absent the
//! Kafka column says so; nothing is guessed.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use super::{BenchArgs, Kafka, Series};

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
