//! A real single-node Apache Kafka (KRaft, combined broker+controller) for tests, run from the jars that
//! `interop/kafka-tools.sh` resolves from Maven Central, and the Java workload in `interop/workload/`.
//!
//! Only loopback: every listener is `127.0.0.1` on ports picked free just before the start. The broker's
//! log4j output goes to `<root>/broker.log` (printed, its tail, only when a test fails). A `Broker` is
//! killed with SIGKILL when dropped, so a panicking test never leaves a JVM behind.

use std::io::{BufRead, Read};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::{have_java, repo_path, required};

/// Whether real Kafka can run here: Java present, or fail when `KLOG_REQUIRE_KAFKA=1` (CI).
pub fn kafka_available() -> bool {
    if have_java() {
        return true;
    }
    assert!(
        !required("KLOG_REQUIRE_KAFKA"),
        "KLOG_REQUIRE_KAFKA=1 but java is not installed"
    );
    super::skip("java is not installed, so real Kafka cannot judge");
    false
}

fn tools() -> Command {
    Command::new(repo_path("interop/kafka-tools.sh"))
}

/// Runs `kafka-tools.sh ARGS`, panicking with its stderr unless it succeeds.
pub fn kafka_tools(args: &[&str]) -> Output {
    let out = tools()
        .args(args)
        .output()
        .expect("interop/kafka-tools.sh runs");
    assert!(
        out.status.success(),
        "kafka-tools.sh {args:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `kafka-dump-log --files FILES FLAGS`: its stdout (it must succeed).
pub fn dump_log(files: &[PathBuf], flags: &[&str]) -> String {
    let list = files
        .iter()
        .map(|f| f.to_str().expect("utf-8 path"))
        .collect::<Vec<_>>()
        .join(",");
    let mut args = vec!["dump-log", "--files", &list];
    args.extend_from_slice(flags);
    String::from_utf8(kafka_tools(&args).stdout).expect("utf-8 dump")
}

/// Runs the Java workload (`dev.klog.interop.Workload ARGS`) and parses its JSON lines.
pub fn workload(args: &[&str]) -> Vec<serde_json::Value> {
    let mut all = vec!["workload"];
    all.extend_from_slice(args);
    let out = kafka_tools(&all);
    String::from_utf8(out.stdout)
        .expect("utf-8 workload output")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("workload line {l:?}: {e}")))
        .collect()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// A formatted single-node cluster: `<root>/data` is the log directory (`log.dirs`), the metadata log
/// lives apart in `<root>/meta` so the data directory holds only partitions and their checkpoints.
pub struct Cluster {
    pub root: PathBuf,
    pub data: PathBuf,
    /// `metadata.log.dir`: where `__cluster_metadata-0` is.
    pub meta: PathBuf,
    /// The id the storage was formatted with (`storage-tool random-uuid`): the broker's cluster id, for
    /// tests to compare what klog learned from the broker with.
    pub cluster_id: String,
    properties: PathBuf,
    log_file: PathBuf,
}

impl Cluster {
    /// Writes `server.properties` and formats the storage with `kafka.tools.StorageTool`.
    pub fn format(root: &Path) -> Cluster {
        Cluster::format_with(root, "")
    }

    /// [`Cluster::format`] with more `server.properties` lines (`key=value\n` each).
    pub fn format_with(root: &Path, extra_properties: &str) -> Cluster {
        Cluster::format_layout(root, extra_properties, false)
    }

    /// [`Cluster::format_with`] in Kafka's default layout with a dynamic quorum: the metadata log inside the
    /// data directory (no `metadata.log.dir`), `controller.quorum.bootstrap.servers` and `format
    /// --standalone` (KRaft version 1: the metadata log holds KRaftVersion and Voters records).
    pub fn format_standalone(root: &Path, extra_properties: &str) -> Cluster {
        Cluster::format_layout(root, extra_properties, true)
    }

    fn format_layout(root: &Path, extra_properties: &str, standalone: bool) -> Cluster {
        let data = root.join("data");
        let meta = if standalone {
            data.clone()
        } else {
            root.join("meta")
        };
        let (port, controller_port) = (free_port(), free_port());
        let properties = root.join("server.properties");
        std::fs::create_dir_all(root).expect("create the cluster's directory");
        let quorum = if standalone {
            format!("controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}\n")
        } else {
            format!(
                "controller.quorum.voters=1@127.0.0.1:{controller_port}\nmetadata.log.dir={}\n",
                meta.display()
            )
        };
        std::fs::write(
            &properties,
            format!(
                "process.roles=broker,controller\n\
                 node.id=1\n\
                 {quorum}\
                 listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
                 controller.listener.names=CONTROLLER\n\
                 inter.broker.listener.name=PLAINTEXT\n\
                 listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
                 log.dirs={}\n\
                 num.partitions=1\n\
                 auto.create.topics.enable=false\n\
                 offsets.topic.replication.factor=1\n\
                 offsets.topic.num.partitions=1\n\
                 transaction.state.log.replication.factor=1\n\
                 transaction.state.log.min.isr=1\n\
                 transaction.state.log.num.partitions=1\n\
                 group.initial.rebalance.delay.ms=0\n\
                 log.flush.interval.messages=9223372036854775807\n{extra_properties}",
                data.display(),
            ),
        )
        .expect("write server.properties");
        let cluster_id = String::from_utf8(kafka_tools(&["storage-tool", "random-uuid"]).stdout)
            .expect("utf-8 uuid")
            .trim()
            .to_owned();
        let mut format = vec![
            "storage-tool",
            "format",
            "-t",
            &cluster_id,
            "-c",
            properties.to_str().expect("utf-8 path"),
        ];
        if standalone {
            format.push("--standalone");
        }
        kafka_tools(&format);
        Cluster {
            log_file: root.join("broker.log"),
            root: root.to_owned(),
            data,
            meta,
            cluster_id,
            properties,
        }
    }

    /// A node on a log directory `data` that something else wrote (`klog cluster export`): no format
    /// step; the metadata log inside `data`, static quorum with this node (`node_id`) as the only voter,
    /// and `extra_properties` (`offsets.topic.num.partitions=N`, ...). Config and log live in `root`.
    pub fn unformatted(root: &Path, data: &Path, node_id: i32, extra_properties: &str) -> Cluster {
        let (port, controller_port) = (free_port(), free_port());
        let properties = root.join("server.properties");
        std::fs::create_dir_all(root).expect("create the node's directory");
        std::fs::write(
            &properties,
            format!(
                "process.roles=broker,controller\n\
                 node.id={node_id}\n\
                 controller.quorum.voters={node_id}@127.0.0.1:{controller_port}\n\
                 listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
                 controller.listener.names=CONTROLLER\n\
                 inter.broker.listener.name=PLAINTEXT\n\
                 listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
                 log.dirs={}\n\
                 auto.create.topics.enable=false\n\
                 offsets.topic.replication.factor=1\n\
                 transaction.state.log.replication.factor=1\n\
                 transaction.state.log.min.isr=1\n\
                 transaction.state.log.num.partitions=1\n\
                 group.initial.rebalance.delay.ms=0\n{extra_properties}",
                data.display(),
            ),
        )
        .expect("write server.properties");
        Cluster {
            log_file: root.join("broker.log"),
            root: root.to_owned(),
            data: data.to_owned(),
            meta: data.to_owned(),
            cluster_id: String::new(),
            properties,
        }
    }

    fn port(&self) -> u16 {
        let text = std::fs::read_to_string(&self.properties).expect("server.properties");
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("advertised.listeners=PLAINTEXT://127.0.0.1:"))
            .expect("the advertised listener");
        line.parse().expect("a port")
    }

    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port())
    }

    /// Starts `kafka.Kafka` and waits until it says it started (or fails with the log's tail).
    pub fn start(&self) -> Broker {
        let (mut broker, from) = launch(
            &self.properties,
            &self.log_file,
            self.bootstrap(),
            None,
            &[],
        );
        broker.wait_started(from);
        broker
    }

    /// Spawns the broker with more environment for the JVM (`LD_PRELOAD` of a test's shim, ...) without
    /// waiting for it to start: the shim may kill it during its start.
    pub fn spawn_with_env(&self, env: &[(&str, &str)]) -> Broker {
        launch(
            &self.properties,
            &self.log_file,
            self.bootstrap(),
            None,
            env,
        )
        .0
    }
}

/// JVM options for a test broker that starts with less CPU: the client compiler only and the serial
/// collector. Three nodes starting at once on a shared 2-core machine took about 50 s without them and
/// 30 s with them; a test broker's throughput is irrelevant.
const QUICK_START_JVM: &str = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC";

/// Spawns `kafka.Kafka PROPERTIES` with its output appended to `log_file` (and `java_opts` as
/// `KLOG_KAFKA_JAVA_OPTS`); returns the broker and where this run's output starts in the file.
fn launch(
    properties: &Path,
    log_file: &Path,
    bootstrap: String,
    java_opts: Option<&str>,
    env: &[(&str, &str)],
) -> (Broker, u64) {
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_file)
        .expect("broker log file");
    let start_len = log.metadata().map(|m| m.len()).unwrap_or(0);
    use std::io::Write;
    writeln!(log, "===== klog test: broker start =====").unwrap();
    let mut command = tools();
    if let Some(opts) = java_opts {
        command.env("KLOG_KAFKA_JAVA_OPTS", opts);
    }
    command.envs(env.iter().copied());
    let child = command
        .args(["run", "kafka.Kafka", properties.to_str().unwrap()])
        .env("KLOG_KAFKA_HEAP_OPTS", "-Xmx512M -Xms256M")
        .env("KLOG_KAFKA_LOG_LEVEL", "INFO")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start kafka.Kafka");
    let broker = Broker {
        child: Some(child),
        log_file: log_file.to_owned(),
        bootstrap,
    };
    (broker, start_len)
}

/// A running broker. Dropping it kills it (SIGKILL); `stop` shuts it down cleanly.
pub struct Broker {
    child: Option<Child>,
    log_file: PathBuf,
    pub bootstrap: String,
}

impl Broker {
    /// Waits until this run (its output from `from` on) says it started, or fails with the log's tail.
    fn wait_started(&mut self, from: u64) {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let text = self.log_since(from);
            if text.contains("Kafka Server started") {
                return;
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                panic!(
                    "the broker exited ({status}) before it started; log tail:\n{}",
                    self.tail()
                );
            }
            assert!(
                Instant::now() < deadline,
                "the broker did not start; log tail:\n{}",
                self.tail()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn log_since(&self, from: u64) -> String {
        let mut f = match std::fs::File::open(&self.log_file) {
            Ok(f) => f,
            Err(_) => return String::new(),
        };
        let mut buf = Vec::new();
        use std::io::Seek;
        let _ = f.seek(std::io::SeekFrom::Start(from));
        let _ = f.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    }

    /// The last 80 lines of the broker log.
    pub fn tail(&self) -> String {
        tail_of(&self.log_file, 80)
    }

    /// Clean shutdown: SIGTERM, then wait for the JVM (Kafka writes `.kafka_cleanshutdown` on the way out).
    pub fn stop(mut self) {
        let mut child = self.child.take().expect("a running broker");
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "SIGTERM failed");
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                // The JVM's exit code on SIGTERM after a clean shutdown hook is 143.
                assert!(
                    status.code().is_some_and(|c| c == 0 || c == 143),
                    "the broker exited with {status}; log tail:\n{}",
                    self.tail()
                );
                return;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the broker did not stop on SIGTERM; log tail:\n{}",
                    self.tail()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A crash: SIGKILL, then wait. Nothing is flushed or checkpointed on the way out.
    /// Waits up to `timeout` for the broker to exit by itself (a test's shim killed it): whether it did.
    pub fn wait_exit(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut() {
                if child.try_wait().expect("poll the broker").is_some() {
                    self.child = None;
                    return true;
                }
            } else {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        false
    }

    pub fn kill(mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The broker log's lines at ERROR or FATAL level since the start of the file.
    pub fn error_lines(&self) -> Vec<String> {
        error_lines(&self.log_file)
    }

    /// [`Self::error_lines`] without the one ERROR Kafka logs at its first start on a klog export: it
    /// leads each partition at the exported epoch E, the broker's registration moves it to E+1 (no
    /// leader) and unfencing to E+2 (kraft-bootstrap §2), so a group coordinator load begun at E is
    /// stopped and logged, then redone at E+2. Any other error is a finding.
    pub fn error_lines_beyond_first_start(&self) -> Vec<String> {
        self.error_lines()
            .into_iter()
            .filter(|l| {
                !(l.contains("Failed to load metadata from __consumer_offsets-")
                    && l.contains("is not online or is no longer the leader"))
            })
            .collect()
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            if std::thread::panicking() {
                eprintln!(
                    "broker log tail ({}):\n{}",
                    self.log_file.display(),
                    self.tail()
                );
            }
        }
    }
}

pub fn tail_of(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Log4j lines at ERROR or FATAL (`[date] LEVEL message (logger)`).
pub fn error_lines(path: &Path) -> Vec<String> {
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(_) => return Vec::new(),
    };
    std::io::BufReader::new(f)
        .lines()
        .map_while(Result::ok)
        .filter(|l| l.contains("] ERROR ") || l.contains("] FATAL "))
        .collect()
}

/// Copies a directory tree (files and subdirectories).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create copy target");
    for e in std::fs::read_dir(from).expect("read dir to copy") {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).expect("copy file");
        }
    }
}

/// One node of a [`KraftCluster`]: a combined broker and controller (one of the quorum's voters).
pub struct Node {
    pub id: i32,
    /// The node's log directory (`log.dirs`): its partition directories and checkpoints.
    pub data: PathBuf,
    pub port: u16,
    properties: PathBuf,
    log_file: PathBuf,
}

impl Node {
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// This node's copy of a partition (its `<topic>-<partition>` directory).
    pub fn partition_dir(&self, topic: &str, partition: i32) -> PathBuf {
        self.data.join(format!("{topic}-{partition}"))
    }

    pub fn log_file(&self) -> &Path {
        &self.log_file
    }
}

/// A formatted multi-node KRaft cluster on loopback: every node is a combined broker and controller,
/// all of them voters of one quorum, formatted with one cluster id. Nodes are started together (a
/// quorum needs a majority before any broker finishes starting), then stopped, killed and started
/// one at a time. Dropping the cluster kills every node still running (SIGKILL).
///
/// Brokers are fenced 4 s after their last heartbeat (Kafka's default is 9 s), so a killed leader's
/// partitions move within seconds; leaders never move back by themselves (no automatic preferred
/// leader election), so a test decides where leaders are.
pub struct KraftCluster {
    pub root: PathBuf,
    pub cluster_id: String,
    pub nodes: Vec<Node>,
    running: Vec<Option<Broker>>,
}

impl KraftCluster {
    /// Writes each node's `server.properties` (node ids 1..=count) and formats every node's storage
    /// with one cluster id.
    pub fn format(root: &Path, count: usize) -> KraftCluster {
        let ports: Vec<(u16, u16)> = (0..count).map(|_| (free_port(), free_port())).collect();
        let voters = ports
            .iter()
            .enumerate()
            .map(|(i, (_, c))| format!("{}@127.0.0.1:{c}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let cluster_id = String::from_utf8(kafka_tools(&["storage-tool", "random-uuid"]).stdout)
            .expect("utf-8 uuid")
            .trim()
            .to_owned();
        let nodes: Vec<Node> = ports
            .iter()
            .enumerate()
            .map(|(i, &(port, controller_port))| {
                write_node(root, i as i32 + 1, port, controller_port, &voters)
            })
            .collect();
        // One JVM per format, in parallel: they share nothing but the cluster id.
        std::thread::scope(|s| {
            for node in &nodes {
                let cluster_id = &cluster_id;
                s.spawn(move || {
                    kafka_tools(&[
                        "storage-tool",
                        "format",
                        "-t",
                        cluster_id,
                        "-c",
                        node.properties.to_str().expect("utf-8 path"),
                    ])
                });
            }
        });
        let running = nodes.iter().map(|_| None).collect();
        KraftCluster {
            root: root.to_owned(),
            cluster_id,
            nodes,
            running,
        }
    }

    /// Every node's address, comma-separated (what a client bootstraps from).
    pub fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .map(Node::bootstrap)
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn node(&self, id: i32) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.id == id)
            .unwrap_or_else(|| panic!("no node {id}"))
    }

    /// Starts every node that is not running, all at once, and waits until each says it started.
    pub fn start_all(&mut self) {
        let ids: Vec<i32> = self.nodes.iter().map(|n| n.id).collect();
        let mut launched = Vec::new();
        for id in ids {
            if !self.is_running(id) {
                let node = self.node(id);
                let quick = Some(QUICK_START_JVM);
                launched.push((
                    id,
                    launch(
                        &node.properties,
                        &node.log_file,
                        node.bootstrap(),
                        quick,
                        &[],
                    ),
                ));
            }
        }
        for (id, (mut broker, from)) in launched {
            broker.wait_started(from);
            self.running[(id - 1) as usize] = Some(broker);
        }
    }

    /// Starts one node (a majority of the quorum must be running or starting) and waits for it.
    pub fn start(&mut self, id: i32) {
        assert!(!self.is_running(id), "node {id} is already running");
        let node = self.node(id);
        let (mut broker, from) = launch(
            &node.properties,
            &node.log_file,
            node.bootstrap(),
            Some(QUICK_START_JVM),
            &[],
        );
        broker.wait_started(from);
        self.running[(id - 1) as usize] = Some(broker);
    }

    pub fn is_running(&self, id: i32) -> bool {
        self.running[(id - 1) as usize].is_some()
    }

    /// A clean shutdown of one node (SIGTERM; controlled shutdown moves its leaderships first).
    pub fn stop(&mut self, id: i32) {
        let broker = self.running[(id - 1) as usize]
            .take()
            .unwrap_or_else(|| panic!("node {id} is not running"));
        broker.stop();
    }

    /// A crash of one node: SIGKILL, nothing flushed.
    pub fn kill(&mut self, id: i32) {
        let broker = self.running[(id - 1) as usize]
            .take()
            .unwrap_or_else(|| panic!("node {id} is not running"));
        broker.kill();
    }

    /// Every running node's log lines at ERROR or FATAL.
    pub fn error_lines(&self) -> Vec<String> {
        self.nodes
            .iter()
            .flat_map(|n| error_lines(&n.log_file))
            .collect()
    }
}

/// `<root>/node<id>/server.properties` for one combined node of a quorum of `voters`.
fn write_node(root: &Path, id: i32, port: u16, controller_port: u16, voters: &str) -> Node {
    let dir = root.join(format!("node{id}"));
    let (data, meta) = (dir.join("data"), dir.join("meta"));
    std::fs::create_dir_all(&dir).expect("create the node's directory");
    let properties = dir.join("server.properties");
    std::fs::write(
        &properties,
        format!(
            "process.roles=broker,controller\n\
             node.id={id}\n\
             controller.quorum.voters={voters}\n\
             listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}\n\
             advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
             controller.listener.names=CONTROLLER\n\
             inter.broker.listener.name=PLAINTEXT\n\
             listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
             log.dirs={}\n\
             metadata.log.dir={}\n\
             num.partitions=1\n\
             auto.create.topics.enable=false\n\
             auto.leader.rebalance.enable=false\n\
             broker.heartbeat.interval.ms=500\n\
             broker.session.timeout.ms=4000\n\
             offsets.topic.replication.factor=1\n\
             offsets.topic.num.partitions=1\n\
             transaction.state.log.replication.factor=1\n\
             transaction.state.log.min.isr=1\n\
             transaction.state.log.num.partitions=1\n\
             group.initial.rebalance.delay.ms=0\n\
             log.flush.interval.messages=9223372036854775807\n",
            data.display(),
            meta.display()
        ),
    )
    .expect("write server.properties");
    Node {
        id,
        data,
        port,
        properties,
        log_file: dir.join("broker.log"),
    }
}
