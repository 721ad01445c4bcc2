//! The harness: start, stop, kill and restart a `rebound serve` process, and
//! run the CLI against it (and, for flow-control tests, see a client's HTTP/2
//! DATA frames through a proxy).
//!
//! Each [`Broker`] owns a temporary directory holding its data dir, its config
//! file and its log, and listens on a free port of 127.0.0.1. The process is
//! killed when the `Broker` is dropped, so a failing test leaks nothing; a
//! failing test also gets the broker's log printed.
//!
//! The contract with the daemon: once it serves, it prints the line
//! `rebound listening on HOST:PORT` to stdout, then, when its HTTP endpoint is
//! on, `rebound http listening on HOST:PORT`; it logs to stderr. The harness
//! gives every broker `--http-listen 127.0.0.1:0` (a free port, so parallel
//! tests never share 8161) unless its config sets `http-listen` itself.
//!
//! Engines: a broker runs on the default store (sled in its data dir) unless
//! it is started inside [`on_postgres`], which [`also_on_postgres!`] uses to
//! run a test a second time with every broker it starts on PostgreSQL, each
//! broker in a schema of its own of the test database (created with the
//! broker, kept over its restarts, dropped after it); see `pg` for where the
//! database comes from and when such a test is skipped.

#[path = "../../storage/tests/pg/mod.rs"]
pub mod pg;

use std::fs::{self, OpenOptions};
use std::future::Future;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rebound_client::{Client, OutgoingMessage};
use tempfile::TempDir;

/// The `rebound` binary under test.
pub const REBOUND: &str = env!("CARGO_BIN_EXE_rebound");

/// How long a broker may take to start or to stop.
const STARTUP: Duration = Duration::from_secs(20);

/// How long a CLI invocation may take.
const CLI_TIMEOUT: Duration = Duration::from_secs(30);

/// The line the daemon prints once it is serving.
const LISTENING: &str = "rebound listening on ";

/// The line the daemon prints after [`LISTENING`] when its HTTP endpoint is on.
const HTTP_LISTENING: &str = "rebound http listening on ";

/// The HTTP endpoint's address, once the daemon printed it.
type HttpAddr = Arc<Mutex<Option<SocketAddr>>>;

tokio::task_local! {
    /// Set (to nothing) while brokers start on PostgreSQL.
    static ON_POSTGRES: ();
}

/// Says a test cannot run here and why: a failure under CI (`CI=true`), where
/// every test must run; elsewhere `SKIPPED` and the reason, and the test returns.
pub fn skipped(reason: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("this test cannot run under CI: {reason}");
    }
    println!("SKIPPED: {reason}");
}

/// Runs `test` with every broker it starts on PostgreSQL; skips it (or fails
/// it under CI) when no test database is configured.
pub async fn on_postgres(test: &str, body: impl Future<Output = ()>) {
    if pg::database_url(test).is_some() {
        ON_POSTGRES.scope((), body).await;
    }
}

/// Defines a test as written (brokers on the default store) and, in a module
/// of the same name, `on_postgres`: the same test with its brokers on
/// PostgreSQL ([`on_postgres`]).
macro_rules! also_on_postgres {
    ($(#[$meta:meta])* async fn $name:ident() $body:block) => {
        $(#[$meta])*
        async fn $name() $body

        mod $name {
            #[allow(unused_imports)]
            use super::*;

            $(#[$meta])*
            async fn on_postgres() {
                $crate::support::on_postgres(module_path!(), async $body).await
            }
        }
    };
}

/// A broker process with its own data directory.
pub struct Broker {
    dir: TempDir,
    config: Option<PathBuf>,
    /// `None` once the process was killed or terminated.
    child: Option<Child>,
    addr: SocketAddr,
    /// Arguments added to `rebound serve` at every (re)start.
    extra: Vec<String>,
    http_addr: HttpAddr,
    /// The open-file limit and environment it runs under, at every (re)start.
    limits: Limits,
    /// The data dir is a tmpfs of its own, unmounted when the broker is dropped.
    tmpfs: bool,
    /// The broker's schema when it runs on PostgreSQL; dropped after the
    /// process is gone (fields drop after [`Drop::drop`]).
    _schema: Option<pg::TestSchema>,
}

impl Broker {
    /// Starts a broker with the built-in default configuration.
    pub async fn start() -> Broker {
        Broker::launch(None).await
    }

    /// Starts a broker with `toml` as its config file (`<tmp>/rebound.toml`).
    pub async fn start_with_config(toml: &str) -> Broker {
        Broker::launch(Some(toml)).await
    }

    /// Starts a broker with `toml` as its config, listening on `listen` (instead
    /// of a free port of 127.0.0.1) with `extra` arguments to `rebound serve`
    /// (kept for restarts, which listen on a free port of 127.0.0.1).
    pub async fn start_custom(toml: &str, listen: &str, extra: &[&str]) -> Broker {
        Broker::start_custom_with_env(toml, listen, extra, &[]).await
    }

    /// [`start_custom`](Self::start_custom) with `env` added to the broker's
    /// environment (kept for restarts).
    pub async fn start_custom_with_env(
        toml: &str,
        listen: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Broker {
        let limits = Limits {
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..Limits::default()
        };
        let extra = extra.iter().map(|a| a.to_string()).collect();
        Broker::launch_limited(Some(toml), listen, extra, limits).await
    }

    /// Starts a broker with `toml` as its config under an open-file limit of
    /// `nofile` (soft and hard, as `ulimit -n` would set it).
    pub async fn start_with_nofile(toml: &str, nofile: u64) -> Broker {
        let limits = Limits {
            nofile: Some(nofile),
            ..Limits::default()
        };
        Broker::launch_limited(Some(toml), ANY_PORT, Vec::new(), limits).await
    }

    /// Starts a broker with `toml` as its config and a data dir on a tmpfs of
    /// `bytes`; the error says why the tmpfs could not be mounted.
    pub async fn start_on_tmpfs(toml: &str, bytes: u64) -> Result<Broker, String> {
        let limits = Limits {
            tmpfs_bytes: Some(bytes),
            ..Limits::default()
        };
        // Mounting needs root (or CAP_SYS_ADMIN): try once on a scratch dir.
        let probe = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(probe.path())
            .stderr(Stdio::null())
            .status();
        if !mounted.is_ok_and(|s| s.success()) {
            return Err("cannot mount a tmpfs here (mount -t tmpfs needs root)".into());
        }
        let _ = Command::new("umount").arg(probe.path()).status();
        Ok(Broker::launch_limited(Some(toml), ANY_PORT, Vec::new(), limits).await)
    }

    async fn launch(toml: Option<&str>) -> Broker {
        Broker::launch_limited(toml, ANY_PORT, Vec::new(), Limits::default()).await
    }

    async fn launch_limited(
        toml: Option<&str>,
        listen: &str,
        mut extra: Vec<String>,
        limits: Limits,
    ) -> Broker {
        let schema = ON_POSTGRES
            .try_with(|()| pg::TestSchema::create("black-box broker on PostgreSQL"))
            .ok()
            .map(|schema| schema.expect("on_postgres checked the database"));
        if let Some(schema) = &schema {
            extra.extend(["--storage", "postgres", "--postgres-url"].map(String::from));
            extra.push(schema.url());
        }
        let dir = tempfile::Builder::new()
            .prefix("rebound-test-")
            .tempdir()
            .expect("create a tempdir");
        let config = toml.map(|toml| {
            let path = dir.path().join("rebound.toml");
            fs::write(&path, toml).expect("write the config file");
            path
        });
        if let Some(bytes) = limits.tmpfs_bytes {
            let data = dir.path().join("data");
            fs::create_dir(&data).expect("create the data dir");
            let mounted = Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={bytes},mode=0700"), "tmpfs"])
                .arg(&data)
                .status()
                .expect("run mount");
            assert!(mounted.success(), "mount a tmpfs on {}", data.display());
        }
        let (child, addr, http_addr) = spawn(dir.path(), config.as_deref(), listen, &extra, &limits)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        Broker {
            dir,
            config,
            child: Some(child),
            addr,
            extra,
            http_addr,
            tmpfs: limits.tmpfs_bytes.is_some(),
            limits,
            _schema: schema,
        }
    }

    /// `host:port` the broker listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL for clients and `--server`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://host:port` of the HTTP endpoint (health, metrics); waits
    /// (bounded) for the daemon to print it, and panics if it does not (the
    /// endpoint is off).
    pub async fn http_url(&self) -> String {
        let found = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if let Some(addr) = *self.http_addr.lock().unwrap() {
                    return addr;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        let addr = found.unwrap_or_else(|_| panic!("the broker printed no {HTTP_LISTENING:?} line"));
        format!("http://{addr}")
    }

    /// `GET /metrics`: its text, checked to be a complete OpenMetrics answer.
    pub async fn scrape(&self) -> String {
        let (status, text) = http_get(&format!("{}/metrics", self.http_url().await)).await;
        assert_eq!(status, 200, "{text}");
        assert!(text.ends_with("# EOF\n"), "OpenMetrics text ends with # EOF");
        text
    }

    /// Whether the broker printed an HTTP listening line (the endpoint is on).
    pub fn http_listening(&self) -> bool {
        self.http_addr.lock().unwrap().is_some()
    }

    /// The broker's data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The temporary directory holding data dir, config and log; a place for a
    /// test's own files too.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Everything the broker wrote to stderr so far, over all its restarts.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("broker.log")).unwrap_or_default()
    }

    /// Waits (bounded) until the log contains `needle`, and returns the log.
    /// Log lines are written asynchronously, so assert on them with this.
    pub async fn wait_for_log(&self, needle: &str) -> String {
        let found = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let log = self.log();
                if log.contains(needle) {
                    return log;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        found.unwrap_or_else(|_| panic!("broker log never contained {needle:?}; log:\n{}", self.log()))
    }

    /// A client connected to this broker.
    pub async fn client(&self) -> Client {
        Client::connect(&self.url())
            .await
            .expect("connect to the test broker")
    }

    /// The broker's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the broker is running").id()
    }

    /// Kills the broker with SIGKILL, like a crash or power loss, and reaps it.
    pub fn kill9(&mut self) {
        let mut child = self.child.take().expect("the broker is running");
        child.kill().expect("SIGKILL the broker");
        child.wait().expect("reap the broker");
    }

    /// Sends SIGSTOP: the broker stalls (as under a long pause) until [`cont`](Self::cont).
    pub fn stop(&self) {
        signal(self.child.as_ref().expect("the broker is running"), "STOP");
    }

    /// Sends SIGCONT: a stalled broker carries on.
    pub fn cont(&self) {
        signal(self.child.as_ref().expect("the broker is running"), "CONT");
    }

    /// Sends SIGHUP: the broker re-reads its config file.
    pub fn hup(&self) {
        signal(self.child.as_ref().expect("the broker is running"), "HUP");
    }

    /// Replaces the config file (the one given to [`start_with_config`](Self::start_with_config))
    /// atomically, so that a broker polling it never reads half a file.
    pub fn rewrite_config(&self, toml: &str) {
        let path = self
            .config
            .as_ref()
            .expect("the broker was started with a config file");
        let staged = path.with_extension("toml.new");
        fs::write(&staged, toml).expect("write the new config file");
        fs::rename(&staged, path).expect("move the new config file into place");
    }

    /// Stops the broker with SIGTERM and waits (bounded) for it to exit.
    pub async fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("the broker is running");
        signal(&child, "TERM");
        let exited = tokio::time::timeout(STARTUP, async {
            loop {
                if let Some(status) = child.try_wait().expect("poll the broker") {
                    return status;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        match exited {
            Ok(status) => status,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the broker did not exit within {STARTUP:?} of SIGTERM; log:\n{}",
                    self.log()
                );
            }
        }
    }

    /// Starts the broker again on the same data dir and config (it may get a new
    /// port; fetch [`url`](Self::url) and clients afresh). A broker still running
    /// is terminated first.
    pub async fn restart(&mut self) {
        if self.child.is_some() {
            self.terminate().await;
        }
        let (child, addr, http_addr) = spawn(
            self.dir.path(),
            self.config.as_deref(),
            ANY_PORT,
            &self.extra,
            &self.limits,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        self.child = Some(child);
        self.addr = addr;
        self.http_addr = http_addr;
    }

    /// Like [`restart`](Self::restart), but on the port it had, as a broker with a
    /// configured address comes back: clients keep their URL and reconnect by
    /// themselves. The daemon binds with `SO_REUSEADDR`, so connections left in
    /// TIME_WAIT do not block it; should another process grab the free port
    /// meanwhile, the bind is retried a few times before the test fails.
    pub async fn restart_on_same_port(&mut self) {
        if self.child.is_some() {
            self.terminate().await;
        }
        let mut attempts = 0;
        let (child, addr, http_addr) = loop {
            match spawn(
                self.dir.path(),
                self.config.as_deref(),
                &self.addr.to_string(),
                &self.extra,
                &self.limits,
            )
            .await
            {
                Ok(spawned) => break spawned,
                Err(e) if attempts == 10 => panic!("{e}"),
                Err(_) => attempts += 1,
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        self.child = Some(child);
        self.addr = addr;
        self.http_addr = http_addr;
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if self.tmpfs {
            let _ = Command::new("umount").arg(self.data_dir()).status();
        }
        if std::thread::panicking() {
            eprintln!(
                "--- broker log ({}) ---\n{}--- end of broker log ---",
                self.dir.path().display(),
                self.log()
            );
        }
    }
}

/// Sends signal `name` (e.g. `TERM`) to `child` with kill(1).
fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .unwrap_or_else(|e| panic!("run kill -{name}: {e}"));
    assert!(status.success(), "kill -{name} failed");
}

/// What a broker process is given beyond its config.
#[derive(Default)]
struct Limits {
    /// The open-file limit, soft and hard.
    nofile: Option<u64>,
    /// The size of a tmpfs mounted as its data dir.
    tmpfs_bytes: Option<u64>,
    /// Variables added to its environment.
    env: Vec<(String, String)>,
}

/// `--listen` for a free port.
const ANY_PORT: &str = "127.0.0.1:0";

/// Spawns `rebound serve` on `listen` in `dir` and waits for its listening line;
/// the error says why it did not listen, with the log.
async fn spawn(
    dir: &Path,
    config: Option<&Path>,
    listen: &str,
    extra: &[String],
    limits: &Limits,
) -> Result<(Child, SocketAddr, HttpAddr), String> {
    let log_path = dir.join("broker.log");
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .expect("open broker.log");
    // prlimit(1) sets the limit and execs the broker: the pid stays the broker's.
    let mut command = match limits.nofile {
        None => Command::new(REBOUND),
        Some(nofile) => {
            let mut prlimit = Command::new("prlimit");
            prlimit
                .arg(format!("--nofile={nofile}:{nofile}"))
                .arg("--")
                .arg(REBOUND);
            prlimit
        }
    };
    command
        .arg("serve")
        .args(["--listen", listen])
        .arg("--data-dir")
        .arg(dir.join("data"));
    if let Some(config) = config {
        command.arg("--config").arg(config);
    }
    command.args(extra);
    let sets_http = config.is_some_and(|config| {
        fs::read_to_string(config)
            .is_ok_and(|toml| toml.lines().any(|l| l.trim_start().starts_with("http-listen")))
    });
    if !sets_http {
        command.args(["--http-listen", ANY_PORT]);
    }
    let mut child = command
        .envs(limits.env.iter().map(|(k, v)| (k, v)))
        .env_remove("REBOUND_SERVER")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("spawn rebound serve");

    // A thread reads stdout: it reports the listening line, then keeps draining
    // so that the broker never blocks on a full pipe.
    let stdout = child.stdout.take().expect("stdout is piped");
    let (tx, rx) = tokio::sync::oneshot::channel();
    let http_addr = HttpAddr::default();
    let http = http_addr.clone();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(addr) = line.strip_prefix(LISTENING)
                && let Some(tx) = tx.take()
            {
                let _ = tx.send(addr.trim().to_owned());
            } else if let Some(addr) = line.strip_prefix(HTTP_LISTENING) {
                let addr = addr.trim().parse().expect("an HTTP listening address");
                *http.lock().unwrap() = Some(addr);
            }
        }
    });

    let log = || fs::read_to_string(&log_path).unwrap_or_default();
    let addr = match tokio::time::timeout(STARTUP, rx).await {
        Ok(Ok(addr)) => addr,
        Ok(Err(_)) => {
            let status = child.wait().expect("reap the broker");
            return Err(format!(
                "the broker exited ({status}) before listening; log:\n{}",
                log()
            ));
        }
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "the broker did not print {LISTENING:?} within {STARTUP:?}; log:\n{}",
                log()
            ));
        }
    };
    let addr = addr
        .parse()
        .unwrap_or_else(|_| panic!("bad listening address {addr:?}"));
    Ok((child, addr, http_addr))
}

/// The outcome of one CLI run, with stdout and stderr as text.
#[derive(Debug)]
pub struct CliOutput {
    /// The exit status.
    pub status: ExitStatus,
    /// Everything written to stdout.
    pub stdout: String,
    /// Everything written to stderr.
    pub stderr: String,
}

impl CliOutput {
    /// Asserts exit code 0, showing both streams if not.
    #[track_caller]
    pub fn success(&self) -> &Self {
        assert!(
            self.status.success(),
            "rebound failed ({}):\nstdout:\n{}\nstderr:\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }

    /// Asserts a failure with exit code `code`, showing both streams if not.
    #[track_caller]
    pub fn failure(&self, code: i32) -> &Self {
        assert_eq!(
            self.status.code(),
            Some(code),
            "expected exit code {code}:\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    /// Stdout as `--json` output: one JSON value per non-empty line.
    #[track_caller]
    pub fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
            .collect()
    }
}

/// The top-level keys of a JSON object, in the order they appear in `line`
/// (`serde_json::Value` sorts them, so the documented order is checked here).
#[track_caller]
pub fn json_keys(line: &str) -> Vec<String> {
    struct Keys(Vec<String>);

    impl<'de> serde::Deserialize<'de> for Keys {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            deserializer.deserialize_map(Keys(Vec::new()))
        }
    }

    impl<'de> serde::de::Visitor<'de> for Keys {
        type Value = Keys;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(mut self, mut map: A) -> Result<Keys, A::Error> {
            while let Some(key) = map.next_key::<String>()? {
                map.next_value::<serde::de::IgnoredAny>()?;
                self.0.push(key);
            }
            Ok(self)
        }
    }

    serde_json::from_str::<Keys>(line)
        .unwrap_or_else(|e| panic!("not a JSON object ({e}): {line}"))
        .0
}

/// Runs `rebound ARGS` (no broker involved), bounded in time.
pub async fn rebound<I, S>(args: I) -> CliOutput
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    rebound_with(args, &[], None).await
}

/// Runs `rebound ARGS` with the environment variables `env` set (the `REBOUND_*`
/// ones of the test process are removed) and `stdin` on its stdin, bounded in time.
pub async fn rebound_with<I, S>(args: I, env: &[(&str, &str)], stdin: Option<&str>) -> CliOutput
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut command = tokio::process::Command::new(REBOUND);
    command.args(args);
    for name in [
        "REBOUND_SERVER",
        "REBOUND_CA_CERT",
        "REBOUND_CLIENT_CERT",
        "REBOUND_CLIENT_KEY",
        "REBOUND_USER",
        "REBOUND_PASSWORD",
        "RUST_LOG",
    ] {
        command.env_remove(name);
    }
    command
        .envs(env.iter().copied())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().expect("run rebound");
    if let Some(text) = stdin {
        use tokio::io::AsyncWriteExt as _;
        let mut pipe = child.stdin.take().expect("stdin is piped");
        pipe.write_all(text.as_bytes())
            .await
            .expect("write rebound's stdin");
    }
    let output: Output = tokio::time::timeout(CLI_TIMEOUT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("rebound did not finish within {CLI_TIMEOUT:?}"))
        .expect("run rebound");
    CliOutput {
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs `rebound ARGS --server <broker>`: a client subcommand against `broker`.
pub async fn cli<I, S>(broker: &Broker, args: I) -> CliOutput
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut all: Vec<std::ffi::OsString> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    all.push("--server".into());
    all.push(broker.url().into());
    rebound(all).await
}

/// The workspace's top directory.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cli/ has a parent")
        .to_owned()
}

/// Writes `text` to `name` in a fresh temporary directory, for tests that need
/// a file but no broker. Keep the `TempDir` alive while using the path.
pub fn temp_file(name: &str, text: &str) -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("create a tempdir");
    let path = dir.path().join(name);
    fs::write(&path, text).expect("write the file");
    (dir, path)
}

/// The harness itself: stop, crash and restart keep the data dir.
mod self_test {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn kill9_terminate_and_restart_keep_the_data_dir() {
        let mut broker = Broker::start().await;
        assert_eq!(broker.url(), format!("http://{}", broker.addr()));
        assert!(broker.data_dir().is_dir(), "the broker creates its data dir");
        broker.wait_for_log("INFO").await;

        let client = broker.client().await;
        client
            .create_queue("kept", "kept", rebound_client::RoutingType::Anycast, true)
            .await
            .unwrap();
        broker.kill9();
        broker.restart().await;
        let info = broker
            .client()
            .await
            .queue("kept")
            .await
            .expect("a durable queue survives SIGKILL");
        assert_eq!(info.name, "kept");

        let status = broker.terminate().await;
        assert!(status.success(), "SIGTERM is a clean shutdown: {status}");
        broker.restart().await;
        broker
            .client()
            .await
            .queue("kept")
            .await
            .expect("and a clean restart");
    }
}

/// `GET url` (`http://host:port/path`) over a fresh HTTP/1.1 connection,
/// bounded in time: the status code and the body as text. Hand-written, as the
/// black-box tests need nothing more than this of an HTTP client.
pub async fn http_get(url: &str) -> (u16, String) {
    http_request("GET", url, None).await
}

/// `POST url` with a JSON body; as [`http_get`].
pub async fn http_post_json(url: &str, body: &serde_json::Value) -> (u16, String) {
    http_request("POST", url, Some(&body.to_string())).await
}

async fn http_request(method: &str, url: &str, json: Option<&str>) -> (u16, String) {
    let answer = http_exchange(method, url, json, None).await;
    (answer.status, answer.body)
}

/// An HTTP answer: status, head (status line and headers) and body.
pub struct HttpAnswer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

/// `method url` with an optional JSON body and HTTP basic `login` (user,
/// password), over a fresh HTTP/1.1 connection, bounded in time.
pub async fn http_exchange(
    method: &str,
    url: &str,
    json: Option<&str>,
    login: Option<(&str, &str)>,
) -> HttpAnswer {
    http_exchange_as(method, url, json, login, None).await
}

/// [`http_exchange`] with `Host: host` (default: the URL's), as a browser sends
/// it for a page of another name.
pub async fn http_exchange_as(
    method: &str,
    url: &str,
    json: Option<&str>,
    login: Option<(&str, &str)>,
    host: Option<&str>,
) -> HttpAnswer {
    use base64::Engine as _;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let host = host.unwrap_or(authority);
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(authority).await?;
        let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
        if let Some((user, password)) = login {
            let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            request.push_str(&format!("Authorization: Basic {encoded}\r\n"));
        }
        if let Some(json) = json {
            request.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}",
                json.len()
            ));
        } else {
            request.push_str("\r\n");
        }
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        std::io::Result::Ok(response)
    };
    let response = tokio::time::timeout(CLI_TIMEOUT, exchange)
        .await
        .unwrap_or_else(|_| panic!("{method} {url} timed out"))
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let response = String::from_utf8(response).expect("a text response");
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    // Answers with a length have it in the head; chunked ones are decoded.
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_owned()
    };
    HttpAnswer {
        status,
        head: head.to_owned(),
        body,
    }
}

/// The body of a chunked HTTP/1.1 response.
fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    loop {
        let (size, after) = rest.split_once("\r\n").expect("a chunk size line");
        let size = usize::from_str_radix(size.trim(), 16).expect("a hex chunk size");
        if size == 0 {
            return body;
        }
        body.push_str(&after[..size]);
        rest = &after[size + 2..];
    }
}

/// The value of the sample `name{labels...}` in a `/metrics` text: the first
/// series of that name whose labels include every one of `labels`.
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (series_name, series_labels) = match series.split_once('{') {
            Some((n, rest)) => (n, rest.strip_suffix('}')?),
            None => (series, ""),
        };
        let has = |(k, v): &(&str, &str)| series_labels.split(',').any(|kv| kv == format!("{k}=\"{v}\""));
        (series_name == name && labels.iter().all(has)).then(|| value.parse().expect("a number"))
    })
}

/// The DATA frames a client sent through a [`frame_counting_proxy`].
#[derive(Default)]
pub struct DataFrames {
    pub frames: std::sync::atomic::AtomicUsize,
    pub bytes: std::sync::atomic::AtomicUsize,
}

/// A loopback proxy to `target` for one HTTP/2 connection, which counts the DATA
/// frames the client sends and their payload bytes: a test that needs small
/// frames can check it got them.
async fn frame_counting_proxy(target: SocketAddr) -> (SocketAddr, Arc<DataFrames>) {
    use std::sync::atomic::Ordering::Relaxed;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counts = Arc::new(DataFrames::default());
    let counted = counts.clone();
    tokio::spawn(async move {
        let (client, _) = listener.accept().await.unwrap();
        let server = tokio::net::TcpStream::connect(target).await.unwrap();
        let (mut from_client, mut to_server) = (client.into_split(), server.into_split());
        let (mut client_read, mut server_write) = (from_client.0, to_server.1);
        tokio::spawn(async move { tokio::io::copy(&mut to_server.0, &mut from_client.1).await });
        // The connection preface (24 bytes), then frames: a 9-byte header (length
        // u24, type, flags, stream id) and the payload. Type 0 is DATA.
        let (mut skip, mut header) = (24usize, Vec::with_capacity(9));
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if server_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
            let mut rest = &buf[..n];
            while !rest.is_empty() {
                if skip > 0 {
                    let k = skip.min(rest.len());
                    (skip, rest) = (skip - k, &rest[k..]);
                    continue;
                }
                let k = (9 - header.len()).min(rest.len());
                header.extend_from_slice(&rest[..k]);
                rest = &rest[k..];
                if header.len() == 9 {
                    skip =
                        usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
                    if header[3] == 0 {
                        counted.frames.fetch_add(1, Relaxed);
                        counted.bytes.fetch_add(skip, Relaxed);
                    }
                    header.clear();
                }
            }
        }
    });
    (addr, counts)
}

/// A channel to `broker` through a [`frame_counting_proxy`], and its count.
/// The client's own receive window is small, so that the answers a test
/// leaves unread do not trip the client's h2 small-frame limit: such a test
/// is about the broker's.
pub async fn frame_counted_channel(broker: &Broker) -> (tonic::transport::Channel, Arc<DataFrames>) {
    let (proxy, data) = frame_counting_proxy(broker.addr()).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{proxy}"))
        .unwrap()
        .initial_stream_window_size(64 << 10)
        .connect()
        .await
        .unwrap();
    (channel, data)
}

/// Waits until a client stream is stuck: `pulled` (the requests it took)
/// did not grow for 2 s, reached `all`, or `within` passed.
pub async fn until_stuck(pulled: &AtomicUsize, all: usize, within: Duration) {
    let deadline = Instant::now() + within;
    let mut last = usize::MAX;
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = pulled.load(Ordering::Relaxed);
        if now == last || now == all || Instant::now() > deadline {
            return;
        }
        last = now;
    }
}

/// Another call on `channel` (a Send), which must be answered within 10 s
/// whatever another stream of the connection does: its error, if any.
pub async fn other_call(channel: tonic::transport::Channel) -> Result<(), tonic::Status> {
    let mut other = rebound_client::proto::messaging_client::MessagingClient::new(channel);
    let sent = other.send(rebound_client::proto::SendRequest {
        messages: vec![OutgoingMessage::new("other", "on the same connection").into()],
    });
    let answered = tokio::time::timeout(Duration::from_secs(10), sent).await;
    answered.expect("the other call is answered").map(drop)
}

/// `requests`, each yielded after a pause that lets the gRPC encoder see nothing
/// more ready, so that each one goes out in a DATA frame of its own (tonic sends
/// what it has encoded whenever the request stream is not ready).
pub fn one_per_frame<S: futures::Stream>(requests: S) -> impl futures::Stream<Item = S::Item> {
    use futures::StreamExt;
    requests.then(|request| async move {
        tokio::task::yield_now().await;
        request
    })
}
