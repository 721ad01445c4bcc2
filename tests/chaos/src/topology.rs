//! What a run runs on: a bridge with one network namespace per machine
//! (PostgreSQL, each node) and their processes, or one node on the embedded
//! store with its data dir on a small tmpfs. Everything created here is
//! undone when its owner is dropped, in reverse order of creation: the
//! processes killed, PostgreSQL stopped, the namespaces (and the iptables
//! rules inside them) and the bridge deleted, the tmpfs unmounted, the
//! temporary directory removed.

use std::borrow::BorrowMut;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rebound_client::{Client, HealthStatus};
use tempfile::TempDir;

/// The queues of the workload, declared by every node's config.
pub const QUEUES: [&str; 3] = ["chaos.a", "chaos.b", "chaos.c"];

/// The nodes' lease: short, so that every fault can outlast a few.
pub const LEASE: &str = "2s";

/// How long a node or PostgreSQL may take to start.
const STARTUP: Duration = Duration::from_secs(30);

/// The nodes' port (each node has an address of its own).
const NODE_PORT: u16 = 61616;

const PG_PORT: u16 = 5432;

/// Where Debian's libfaketime keeps its multithreaded variant.
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// What went wrong building or driving the topology.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "root is needed: the run creates network namespaces, iptables rules and tmpfs mounts (run it as root, e.g. with sudo)"
    )]
    NotRoot,
    #[error("`{command}` failed: {detail}")]
    Command { command: String, detail: String },
    #[error("{what} did not {doing} within {within:?}; its log: {log}")]
    Timeout {
        what: String,
        doing: &'static str,
        within: Duration,
        log: String,
    },
    /// Something the run needs is not there (a package, a binary, a running node).
    #[error("{0}")]
    Missing(String),
    /// The brokers did not answer what the run asked of them.
    #[error("{0}")]
    Unanswered(String),
    #[error("interrupted by {0}; everything the run made is removed")]
    Interrupted(&'static str),
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
}

pub type Result<T> = std::result::Result<T, Error>;

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let context = context.into();
    move |source| Error::Io { context, source }
}

/// Runs `command` to completion; an error names it and carries its stderr.
pub fn run(mut command: impl BorrowMut<Command>) -> Result<()> {
    let command = command.borrow_mut();
    let shown = format!("{command:?}").replace('"', "");
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::Command {
            command: shown.clone(),
            detail: e.to_string(),
        })?;
    if output.status.success() {
        return Ok(());
    }
    Err(Error::Command {
        command: shown,
        detail: format!(
            "{}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ),
    })
}

fn cmd(program: &str, args: &[&str]) -> Command {
    let mut command = Command::new(program);
    command.args(args);
    command
}

/// Fails with [`Error::NotRoot`] unless the harness runs as root.
pub fn require_root() -> Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Error::NotRoot);
    }
    Ok(())
}

/// A temporary directory that other users may traverse (PostgreSQL runs as
/// `postgres`).
fn scratch_dir() -> Result<TempDir> {
    let dir = tempfile::Builder::new()
        .prefix("rebound-chaos-")
        .tempdir()
        .map_err(io("create a temporary directory"))?;
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755))
        .map_err(io("chmod the temporary directory"))?;
    Ok(dir)
}

/// The bridge and the namespaces on it; deleted on drop.
struct Net {
    tag: String,
    /// The first three octets of the run's /24.
    prefix: String,
    namespaces: Vec<String>,
}

impl Net {
    /// A bridge named after this process, with the harness's address on it.
    fn create() -> Result<Net> {
        let pid = std::process::id();
        let net = Net {
            tag: format!("rbc{:04x}", pid & 0xffff),
            prefix: format!("10.199.{}", pid % 200 + 20),
            namespaces: Vec::new(),
        };
        run(cmd("ip", &["link", "add", &net.tag, "type", "bridge"]))?;
        run(cmd("ip", &["link", "set", &net.tag, "up"]))?;
        run(cmd(
            "ip",
            &["addr", "add", &format!("{}.1/24", net.prefix), "dev", &net.tag],
        ))?;
        Ok(net)
    }

    /// A namespace `name` on the bridge, at `.{host}` of the run's /24; returns
    /// the namespace's name and its address.
    fn add(&mut self, name: &str, host: u8) -> Result<(String, String)> {
        let ns = format!("{}-{name}", self.tag);
        let ip = format!("{}.{host}", self.prefix);
        run(cmd("ip", &["netns", "add", &ns]))?;
        self.namespaces.push(ns.clone());
        run(cmd(
            "ip",
            &[
                "link", "add", &ns, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ],
        ))?;
        run(cmd("ip", &["link", "set", &ns, "master", &self.tag, "up"]))?;
        run(cmd("ip", &["-n", &ns, "link", "set", "lo", "up"]))?;
        run(cmd("ip", &["-n", &ns, "link", "set", "eth0", "up"]))?;
        run(cmd(
            "ip",
            &["-n", &ns, "addr", "add", &format!("{ip}/24"), "dev", "eth0"],
        ))?;
        Ok((ns, ip))
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in &self.namespaces {
            let _ = run(cmd("ip", &["netns", "del", ns]));
        }
        let _ = run(cmd("ip", &["link", "del", &self.tag]));
    }
}

/// Runs iptables in a namespace.
pub fn iptables(ns: &str, rule: &[&str]) -> Result<()> {
    let mut command = cmd("ip", &["netns", "exec", ns, "iptables", "-w"]);
    command.args(rule);
    run(&mut command)
}

/// A private PostgreSQL in its own namespace, listening on TCP only there.
pub struct Postgres {
    bin: PathBuf,
    data: PathBuf,
    log: PathBuf,
    pub ns: String,
    pub ip: String,
    running: bool,
}

impl Postgres {
    /// initdb into `dir` (as `postgres`: the server refuses root), trusting
    /// the run's /24, then starts it.
    fn create(dir: &Path, ns: String, ip: String, subnet: &str) -> Result<Postgres> {
        let bin = fs::read_dir("/usr/lib/postgresql")
            .ok()
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|bin| bin.join("initdb").exists())
            .max()
            .ok_or_else(|| {
                Error::Missing("no PostgreSQL under /usr/lib/postgresql (apt-get install postgresql)".into())
            })?;
        fs::create_dir(dir).map_err(io("create PostgreSQL's directory"))?;
        run(cmd("chown", &["postgres:", &dir.to_string_lossy()]))?;
        let data = dir.join("data");
        let mut initdb = as_postgres(&bin.join("initdb"));
        initdb.arg("-D").arg(&data).args([
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
        ]);
        run(&mut initdb)?;
        OpenOptions::new()
            .append(true)
            .open(data.join("pg_hba.conf"))
            .and_then(|mut hba| writeln!(hba, "host all all {subnet}.0/24 trust"))
            .map_err(io("write pg_hba.conf"))?;
        let mut pg = Postgres {
            bin,
            data,
            log: dir.join("server.log"),
            ns,
            ip,
            running: false,
        };
        pg.start()?;
        let mut createdb = cmd(
            "ip",
            &["netns", "exec", &pg.ns, "runuser", "-u", "postgres", "--"],
        );
        createdb
            .arg(pg.bin.join("createdb"))
            .args(["-h", &pg.ip, "-p", &PG_PORT.to_string(), "rebound"]);
        run(&mut createdb)?;
        Ok(pg)
    }

    /// The nodes' database URL.
    pub fn url(&self) -> String {
        format!("postgres://postgres@{}:{PG_PORT}/rebound", self.ip)
    }

    /// Starts the server (in its namespace) and waits until it accepts connections.
    pub fn start(&mut self) -> Result<()> {
        let options = format!(
            "-c listen_addresses={} -p {PG_PORT} -k {} -c fsync=on -c synchronous_commit=on -c max_connections=200",
            self.ip,
            self.data.parent().expect("data has a parent").display()
        );
        let mut start = cmd(
            "ip",
            &["netns", "exec", &self.ns, "runuser", "-u", "postgres", "--"],
        );
        start
            .arg(self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .arg("-l")
            .arg(&self.log);
        start.args(["-w", "-t", "60", "start", "-o", &options]);
        run(&mut start)?;
        self.running = true;
        Ok(())
    }

    /// Stops the server at once, as a crash would (no checkpoint).
    pub fn crash(&mut self) -> Result<()> {
        let mut stop = as_postgres(&self.bin.join("pg_ctl"));
        stop.arg("-D").arg(&self.data).args(["-m", "immediate", "stop"]);
        run(&mut stop)?;
        self.running = false;
        Ok(())
    }

    pub fn running(&self) -> bool {
        self.running
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if self.running {
            let _ = self.crash();
        }
    }
}

fn as_postgres(program: &Path) -> Command {
    let mut command = cmd("runuser", &["-u", "postgres", "--"]);
    command.arg(program);
    command
}

/// One `rebound serve` process, restartable with the same arguments.
pub struct Node {
    pub name: String,
    pub url: String,
    /// Its namespace, in a cluster.
    pub ns: Option<String>,
    pub ip: String,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    out: PathBuf,
    log: PathBuf,
    /// libfaketime's timestamp file: the node's clock offset.
    clock: Option<PathBuf>,
    child: Option<Child>,
    paused: bool,
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl Node {
    /// Starts the process and waits until it says it listens.
    pub async fn start(&mut self) -> Result<()> {
        let mut command = match &self.ns {
            Some(ns) => cmd("ip", &["netns", "exec", ns]),
            None => Command::new(&self.program),
        };
        if self.ns.is_some() {
            command.arg(&self.program);
        }
        command
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        let out = File::create(&self.out).map_err(io("create the node's stdout file"))?;
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(io("open the node's log"))?;
        command.stdin(Stdio::null()).stdout(out).stderr(log);
        let child = command
            .spawn()
            .map_err(io(format!("start {}", self.program.display())))?;
        self.child = Some(child);
        self.paused = false;
        let deadline = Instant::now() + STARTUP;
        loop {
            if fs::read_to_string(&self.out).is_ok_and(|out| out.contains("rebound listening on ")) {
                return Ok(());
            }
            let exited = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || Instant::now() > deadline {
                self.kill();
                return Err(Error::Timeout {
                    what: format!("node {}", self.name),
                    doing: "start",
                    within: STARTUP,
                    log: self.log_tail(),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGKILL, and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.paused = false;
    }

    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    /// SIGSTOP: the process stalls, its sockets stay open.
    pub fn pause(&mut self) -> Result<()> {
        self.signal(libc::SIGSTOP)?;
        self.paused = true;
        Ok(())
    }

    /// SIGCONT.
    pub fn resume(&mut self) -> Result<()> {
        self.signal(libc::SIGCONT)?;
        self.paused = false;
        Ok(())
    }

    pub fn paused(&self) -> bool {
        self.paused
    }

    fn signal(&self, signal: libc::c_int) -> Result<()> {
        let child = self
            .child
            .as_ref()
            .ok_or_else(|| Error::Missing(format!("node {} is not running", self.name)))?;
        let pid = libc::pid_t::try_from(child.id()).expect("a pid fits pid_t");
        // SAFETY: kill has no memory preconditions; the pid is our unreaped child.
        if unsafe { libc::kill(pid, signal) } != 0 {
            return Err(io(format!("signal {signal} to node {}", self.name))(
                std::io::Error::last_os_error(),
            ));
        }
        Ok(())
    }

    /// Moves the node's wall clock `offset_s` seconds from the true time
    /// (libfaketime reads the file again within a second).
    pub fn set_clock(&self, offset_s: i64) -> Result<()> {
        let path = self
            .clock
            .as_ref()
            .ok_or_else(|| Error::Missing(format!("node {} runs without libfaketime", self.name)))?;
        fs::write(path, format!("{offset_s:+}\n")).map_err(io("write the clock file"))
    }

    /// Whether the node answers its health check with SERVING.
    pub async fn serving(&self) -> bool {
        let check = async {
            let client = Client::connect(&self.url).await.ok()?;
            client.health().await.ok()
        };
        matches!(
            tokio::time::timeout(Duration::from_secs(3), check).await,
            Ok(Some(HealthStatus::Serving))
        )
    }

    /// Copies its log into `dir`, as `<name>.log`.
    fn save_log(&self, dir: &Path) -> Result<()> {
        let to = dir.join(format!("{}.log", self.name));
        fs::copy(&self.log, &to).map_err(io(format!("copy the log of {} to {}", self.name, to.display())))?;
        Ok(())
    }

    /// The last lines of its log, for an error message.
    pub fn log_tail(&self) -> String {
        let log = fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().rev().take(15).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join("\n")
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The config every node runs with: the workload's queues, redelivery soon
/// after a nack, and never a dead letter (a message dead-lettered would look
/// lost). Anonymous clients are served on the namespaces' private addresses.
/// `top` adds top-level keys.
fn config(top: &str) -> String {
    let mut toml = format!(
        "allow-anonymous = true\npersist-delivery-count-before-delivery = true\n{top}\n\
         [[address-settings]]\nmatch = \"#\"\nmax-delivery-attempts = 1000\nredelivery-delay = 100\n",
    );
    for queue in QUEUES {
        toml.push_str(&format!(
            "\n[[addresses]]\nname = \"{queue}\"\n  [[addresses.queues]]\n  name = \"{queue}\"\n"
        ));
    }
    toml
}

/// Three nodes on one PostgreSQL, each machine in a namespace of its own.
/// Fields drop in order: nodes, database, network, files.
pub struct Cluster {
    pub nodes: Vec<Node>,
    pub pg: Postgres,
    /// Held for its drop, which deletes the namespaces and the bridge.
    _net: Net,
    dir: TempDir,
}

impl Cluster {
    /// Builds the network, starts PostgreSQL and three nodes (each under
    /// libfaketime, so that its clock can jump), and waits until they serve.
    pub async fn start(rebound: &Path) -> Result<Cluster> {
        require_root()?;
        if !Path::new(LIBFAKETIME).exists() {
            return Err(Error::Missing(format!(
                "no {LIBFAKETIME} (apt-get install faketime)"
            )));
        }
        let dir = scratch_dir()?;
        let mut net = Net::create()?;
        let (pg_ns, pg_ip) = net.add("pg", 2)?;
        let pg = Postgres::create(&dir.path().join("pg"), pg_ns, pg_ip, &net.prefix)?;
        let config_file = dir.path().join("rebound.toml");
        fs::write(&config_file, config("")).map_err(io("write the nodes' config"))?;
        let mut nodes = Vec::new();
        for i in 1..=3u8 {
            let name = format!("n{i}");
            let (ns, ip) = net.add(&name, 10 + i)?;
            let listen = format!("{ip}:{NODE_PORT}");
            let clock = dir.path().join(format!("{name}.clock"));
            fs::write(&clock, "+0\n").map_err(io("write a clock file"))?;
            let args = [
                "serve",
                "--config",
                &config_file.to_string_lossy(),
                "--listen",
                &listen,
                "--advertise",
                &listen,
                "--http-listen",
                "",
                "--storage",
                "postgres",
                "--postgres-url",
                &pg.url(),
                "--node-id",
                &name,
                "--cluster-lease",
                LEASE,
            ];
            // Only the wall clock jumps, as under a stepped NTP clock; the
            // monotonic clock (leases, timeouts) stays true.
            let env = [
                ("LD_PRELOAD", LIBFAKETIME),
                ("FAKETIME_TIMESTAMP_FILE", &clock.to_string_lossy()),
                ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
                // Re-read the file every second rather than at every call
                // (FAKETIME_NO_CACHE), which would cost a read per clock call.
                ("FAKETIME_CACHE_DURATION", "1"),
            ];
            nodes.push(Node {
                url: format!("http://{listen}"),
                out: dir.path().join(format!("{name}.out")),
                log: dir.path().join(format!("{name}.log")),
                name: name.clone(),
                ns: Some(ns),
                ip,
                program: rebound.to_owned(),
                args: args.map(String::from).to_vec(),
                env: env.map(|(k, v)| (k.to_owned(), v.to_owned())).to_vec(),
                clock: Some(clock),
                child: None,
                paused: false,
            });
        }
        let mut cluster = Cluster {
            nodes,
            pg,
            _net: net,
            dir,
        };
        for node in &mut cluster.nodes {
            node.start().await?;
        }
        cluster.wait_serving(STARTUP).await?;
        Ok(cluster)
    }

    /// The run's directory (logs).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Undoes every fault still in force: rules flushed, clocks true, paused
    /// nodes resumed, dead ones and PostgreSQL started.
    pub async fn heal(&mut self) -> Result<()> {
        if !self.pg.running() {
            self.pg.start()?;
        }
        for node in &mut self.nodes {
            let ns = node.ns.clone().expect("cluster nodes have a namespace");
            iptables(&ns, &["-F", "INPUT"])?;
            iptables(&ns, &["-F", "OUTPUT"])?;
            node.set_clock(0)?;
            if node.paused() {
                node.resume()?;
            }
            if !node.running() {
                node.start().await?;
            }
        }
        Ok(())
    }

    /// Waits until every node answers its health check and every queue is
    /// served by a node.
    pub async fn wait_serving(&self, within: Duration) -> Result<()> {
        let deadline = Instant::now() + within;
        loop {
            let mut all = true;
            for node in &self.nodes {
                all &= node.serving().await;
            }
            if all && self.queues_served().await {
                return Ok(());
            }
            if Instant::now() > deadline {
                let logs: Vec<String> = self
                    .nodes
                    .iter()
                    .map(|n| format!("{}:\n{}", n.name, n.log_tail()))
                    .collect();
                return Err(Error::Timeout {
                    what: "the cluster".into(),
                    doing: "serve every queue",
                    within,
                    log: logs.join("\n"),
                });
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    async fn queues_served(&self) -> bool {
        let list = async {
            let client = Client::connect(&self.nodes[0].url).await.ok()?;
            client.list_queues().await.ok()
        };
        let Ok(Some(queues)) = tokio::time::timeout(Duration::from_secs(5), list).await else {
            return false;
        };
        QUEUES.iter().all(|q| {
            queues
                .iter()
                .any(|info| info.name == *q && !info.served_by.is_empty())
        })
    }

    /// The addresses of the nodes other than `node`.
    pub fn peers_of(&self, node: usize) -> Vec<String> {
        (0..self.nodes.len())
            .filter(|&i| i != node)
            .map(|i| self.nodes[i].ip.clone())
            .collect()
    }
}

/// A tmpfs mounted for the life of the value.
struct Tmpfs {
    path: PathBuf,
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = run(cmd("umount", &[&self.path.to_string_lossy()]));
    }
}

/// One node on the embedded store, its data dir on a tmpfs of its own.
/// Fields drop in order: node, tmpfs, files.
pub struct Single {
    pub node: Node,
    tmpfs: Tmpfs,
    dir: TempDir,
}

/// The embedded node's tmpfs: room for a few journal segments.
const TMPFS_BYTES: u64 = 64 << 20;

impl Single {
    pub async fn start(rebound: &Path) -> Result<Single> {
        require_root()?;
        let dir = scratch_dir()?;
        let data = dir.path().join("data");
        fs::create_dir(&data).map_err(io("create the data dir"))?;
        run(cmd(
            "mount",
            &[
                "-t",
                "tmpfs",
                "-o",
                &format!("size={TMPFS_BYTES},mode=0700"),
                "tmpfs",
                &data.to_string_lossy(),
            ],
        ))?;
        let tmpfs = Tmpfs { path: data.clone() };
        let config_file = dir.path().join("rebound.toml");
        // Journal segments of 64 KiB: at the workload's rate one fills every
        // few seconds, and the checkpoint at its end writes new files, so a
        // full disk is felt within a fault's hold.
        let config = config("journal-file-size = 65536\n");
        fs::write(&config_file, config).map_err(io("write the node's config"))?;
        // A free port, kept over restarts so that clients keep their URL.
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(io("find a free port"))?
            .port();
        let listen = format!("127.0.0.1:{port}");
        let args = [
            "serve",
            "--config",
            &config_file.to_string_lossy(),
            "--listen",
            &listen,
            "--http-listen",
            "",
            "--data-dir",
            &data.to_string_lossy(),
        ];
        let mut node = Node {
            name: "embedded".into(),
            url: format!("http://{listen}"),
            ns: None,
            ip: "127.0.0.1".into(),
            program: rebound.to_owned(),
            args: args.map(String::from).to_vec(),
            env: Vec::new(),
            out: dir.path().join("node.out"),
            log: dir.path().join("node.log"),
            clock: None,
            child: None,
            paused: false,
        };
        node.start().await?;
        let single = Single { node, tmpfs, dir };
        single.wait_serving(STARTUP).await?;
        Ok(single)
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Fills the data dir's tmpfs until a write of a page fails with ENOSPC.
    pub fn fill_disk(&self) -> Result<()> {
        let mut filler = File::create(self.filler()).map_err(io("create the filler file"))?;
        for size in [1 << 20, 4 << 10] {
            let chunk = vec![0u8; size];
            loop {
                match filler.write_all(&chunk) {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                    Err(e) => return Err(io("fill the tmpfs")(e)),
                }
            }
        }
        Ok(())
    }

    pub fn free_disk(&self) -> Result<()> {
        match fs::remove_file(self.filler()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("remove the filler file")(e)),
            _ => Ok(()),
        }
    }

    fn filler(&self) -> PathBuf {
        self.tmpfs.path.join("chaos-filler")
    }

    pub async fn heal(&mut self) -> Result<()> {
        self.free_disk()?;
        if !self.node.running() {
            self.node.start().await?;
        }
        Ok(())
    }

    pub async fn wait_serving(&self, within: Duration) -> Result<()> {
        let deadline = Instant::now() + within;
        while !self.node.serving().await {
            if Instant::now() > deadline {
                return Err(Error::Timeout {
                    what: "the embedded node".into(),
                    doing: "serve",
                    within,
                    log: self.node.log_tail(),
                });
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        Ok(())
    }
}

/// What a run runs on.
pub enum Topology {
    Cluster(Cluster),
    Embedded(Single),
}

impl Topology {
    /// Each node's name and URL.
    pub fn nodes(&self) -> Vec<(String, String)> {
        let named = |n: &Node| (n.name.clone(), n.url.clone());
        match self {
            Topology::Cluster(c) => c.nodes.iter().map(named).collect(),
            Topology::Embedded(s) => vec![named(&s.node)],
        }
    }

    pub async fn heal(&mut self) -> Result<()> {
        match self {
            Topology::Cluster(c) => c.heal().await,
            Topology::Embedded(s) => s.heal().await,
        }
    }

    pub async fn wait_serving(&self, within: Duration) -> Result<()> {
        match self {
            Topology::Cluster(c) => c.wait_serving(within).await,
            Topology::Embedded(s) => s.wait_serving(within).await,
        }
    }

    /// Copies the nodes' logs (and PostgreSQL's) into `dir`, creating it.
    pub fn save_logs(&self, dir: &Path) -> Result<()> {
        fs::create_dir_all(dir).map_err(io(format!("create {}", dir.display())))?;
        match self {
            Topology::Cluster(c) => {
                let to = dir.join("postgres.log");
                fs::copy(&c.pg.log, &to).map_err(io(format!("copy PostgreSQL's log to {}", to.display())))?;
                c.nodes.iter().try_for_each(|n| n.save_log(dir))
            }
            Topology::Embedded(s) => s.node.save_log(dir),
        }
    }

    /// The run's directory: configs and the nodes' logs.
    pub fn dir(&self) -> &Path {
        match self {
            Topology::Cluster(c) => c.dir(),
            Topology::Embedded(s) => s.dir(),
        }
    }
}
