//! A private PostgreSQL server for one test, which the test stops and starts
//! again: what a database restart does to the broker (connections closed by
//! the server, "the database system is starting up" while it comes back) is
//! not what a cut network does. The server binaries are Debian's
//! (`/usr/lib/postgresql/*/bin`, which `.ci/run` installs); without them a
//! test fails under `CI=true` and is skipped elsewhere, saying so. As root,
//! the server runs as the `postgres` user (it refuses root).

use std::path::PathBuf;
use std::process::Command;

pub struct PrivateServer {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
}

impl PrivateServer {
    /// An initialised and started server, or `None` (after saying why)
    /// outside CI without the binaries.
    pub fn start(test: &str) -> Option<PrivateServer> {
        let Some(bin) = binaries() else {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "no PostgreSQL under /usr/lib/postgresql: CI must run this test (apt-get install postgresql)"
            );
            println!("SKIPPED: {test}: no PostgreSQL server under /usr/lib/postgresql");
            return None;
        };
        let dir = tempfile::Builder::new().prefix("rebound-pg-").tempdir().unwrap();
        // Root? (`id -u` prints 0.)
        let as_postgres = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"0"));
        let server = PrivateServer {
            port: free_port(),
            dir,
            bin,
            as_postgres,
        };
        if as_postgres {
            server.run(
                "chown",
                &["postgres:", server.dir.path().to_str().unwrap()],
                false,
            );
        }
        let data = server.data();
        server.run(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
            ],
            true,
        );
        server.start_again();
        Some(server)
    }

    /// The URL of its `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Stops the server (`pg_ctl stop -m fast`: connections are closed).
    pub fn stop(&self) {
        self.run("pg_ctl", &["-D", &self.data(), "-m", "fast", "-w", "stop"], true);
    }

    /// Starts the server, on the same port, and waits until it accepts.
    pub fn start_again(&self) {
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync=on -c synchronous_commit=on",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("server.log");
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data(),
                "-l",
                log.to_str().unwrap(),
                "-w",
                "-t",
                "60",
                "-o",
                &options,
                "start",
            ],
            true,
        );
    }

    fn data(&self) -> String {
        self.dir.path().join("data").to_str().unwrap().to_owned()
    }

    /// Runs `program` (a server binary when `server`), as `postgres` when root.
    fn run(&self, program: &str, args: &[&str], server: bool) {
        let path = match server {
            true => self.bin.join(program).to_str().unwrap().to_owned(),
            false => program.to_owned(),
        };
        let mut command = match self.as_postgres && server {
            true => {
                let mut c = Command::new("runuser");
                c.args(["-u", "postgres", "--", &path]);
                c
            }
            false => Command::new(&path),
        };
        let out = command
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(
            out.status.success(),
            "{path} {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        let data = self.data();
        let pg_ctl = self.bin.join("pg_ctl");
        let pg_ctl = pg_ctl.to_str().unwrap();
        let args = ["-D", data.as_str(), "-m", "immediate", "stop"];
        let _ = match self.as_postgres {
            true => Command::new("runuser")
                .args(["-u", "postgres", "--", pg_ctl])
                .args(args)
                .output(),
            false => Command::new(pg_ctl).args(args).output(),
        };
    }
}

/// The newest `/usr/lib/postgresql/<version>/bin` with an `initdb`.
fn binaries() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
