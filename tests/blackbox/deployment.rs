//! Running rebound as a service (issue 13): the data dir is private to the
//! broker's user, `rebound health` answers what a container's HEALTHCHECK asks,
//! and the Docker image's config and Dockerfile are what the README promises.
//! (No Docker engine runs in the tests; the image is checked by its files.)
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use rebound_client::OutgoingMessage;

use crate::support::{Broker, cli, rebound, root};

/// Every directory and file under `dir` (itself included) with its permission bits.
fn modes(dir: &Path) -> Vec<(String, bool, u32)> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(path) = pending.pop() {
        let meta = fs::symlink_metadata(&path).unwrap();
        out.push((
            path.display().to_string(),
            meta.is_dir(),
            meta.permissions().mode() & 0o777,
        ));
        if meta.is_dir() {
            pending.extend(fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn the_data_dir_and_its_files_are_private_to_the_brokers_user() {
    let mut broker = Broker::start().await;
    let client = broker.client().await;
    // A small message (journal, sled) and a large one (a body file of its own).
    client
        .send(OutgoingMessage::new("private", "secret"))
        .await
        .unwrap();
    client
        .send(OutgoingMessage::new("private", vec![7u8; 512 << 10]))
        .await
        .unwrap();
    broker.terminate().await;

    let modes = modes(&broker.data_dir());
    assert!(modes.iter().filter(|(_, dir, _)| !dir).count() >= 3, "{modes:?}");
    assert!(
        modes.iter().any(|(path, _, _)| path.ends_with(".body")),
        "a large body file: {modes:?}"
    );
    for (path, dir, mode) in &modes {
        let expected = if *dir { 0o700 } else { 0o600 };
        assert_eq!(*mode, expected, "{path} is {mode:o}");
    }

    // An existing data dir open to others is the user's choice: left as it is, but
    // the broker says so.
    fs::set_permissions(broker.data_dir(), fs::Permissions::from_mode(0o755)).unwrap();
    broker.restart().await;
    let log = broker.wait_for_log("open to other local users").await;
    assert!(log.contains("WARN") && log.contains("mode=755"), "{log}");
    let mode = fs::metadata(broker.data_dir()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755);
    assert_eq!(broker.client().await.queue("private").await.unwrap().messages, 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn health_says_whether_the_broker_serves() {
    let broker = Broker::start().await;
    let out = cli(&broker, ["health"]).await;
    assert_eq!(out.success().stdout, "SERVING\n");

    let out = rebound(["health", "--server", "http://127.0.0.1:1"]).await;
    out.failure(1);
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr
            .starts_with("error: cannot connect to http://127.0.0.1:1"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_docker_image_runs_unprivileged_on_a_checked_config() {
    let root = root();
    let config = root.join("docker/rebound.toml");
    let out = rebound(["config", "check", "--config", config.to_str().unwrap()]).await;
    assert_eq!(out.success().stdout, "ok\n");
    let text = fs::read_to_string(&config).unwrap();
    assert!(text.contains("listen = \"0.0.0.0:61616\"") && text.contains("data-dir = \"/data\""));

    let dockerfile = fs::read_to_string(root.join("docker/Dockerfile")).unwrap();
    let last_stage = &dockerfile[dockerfile.rfind("\nFROM ").unwrap()..];
    for line in [
        "USER 10001:10001",
        "VOLUME /data",
        "CMD [\"rebound\", \"health\", \"--server\", \"http://127.0.0.1:61616\"]",
        "CMD [\"serve\", \"--config\", \"/etc/rebound/rebound.toml\"]",
    ] {
        assert!(last_stage.lines().any(|l| l.trim() == line), "Dockerfile: {line}");
    }
    assert!(last_stage.contains("chown rebound:rebound /data") && last_stage.contains("chmod 0700 /data"));
    // The README publishes the port on the host's loopback only.
    let readme = fs::read_to_string(root.join("README.md")).unwrap();
    let runs: Vec<&str> = readme
        .lines()
        .filter(|l| l.starts_with("docker run -d"))
        .collect();
    assert!(!runs.is_empty());
    assert!(
        runs.iter().all(|l| l.contains("-p 127.0.0.1:61616:61616")),
        "{runs:?}"
    );
}
