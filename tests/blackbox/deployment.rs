//! Running rebound as a service (issue 13): the data dir is private to the
//! broker's user, `rebound health` answers what a container's HEALTHCHECK asks,
//! and the Docker image's config and Dockerfile are what docs/operations.md promises.
//! (No Docker engine runs in the tests; the image is checked by its files.)
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use rebound_client::OutgoingMessage;

use crate::support::{Broker, cli, rebound, root, temp_file};

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
    let text = fs::read_to_string(&config).unwrap();
    assert!(text.contains("listen = \"0.0.0.0:61616\"") && text.contains("data-dir = \"/data\""));
    // As shipped it asks for the [[users]] its comments say to add, as `serve`
    // would; with one it is ready.
    let out = rebound(["config", "check", "--config", config.to_str().unwrap()]).await;
    assert!(
        out.failure(2).stderr.contains("without [[users]]"),
        "{}",
        out.stderr
    );
    let (_dir, with_user) = temp_file("rebound.toml", &format!("{text}\n[[users]]\nname = \"app\"\n"));
    let out = rebound(["config", "check", "--config", with_user.to_str().unwrap()]).await;
    assert_eq!(out.success().stdout, "ok\n");

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
    // The docs publish the port on the host's loopback only.
    let docs = fs::read_to_string(root.join("docs/operations.md")).unwrap();
    let runs: Vec<&str> = docs.lines().filter(|l| l.starts_with("docker run -d")).collect();
    assert!(!runs.is_empty());
    assert!(
        runs.iter().all(|l| l.contains("-p 127.0.0.1:61616:61616")),
        "{runs:?}"
    );
}

/// The metric names a Grafana dashboard's queries use (`rebound_*`, `process_*`),
/// a histogram's `_bucket` series as its family.
fn dashboard_metrics(dashboard: &serde_json::Value) -> std::collections::BTreeSet<String> {
    fn exprs<'a>(value: &'a serde_json::Value, out: &mut Vec<&'a str>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, value) in map {
                    match value.as_str() {
                        Some(expr) if key == "expr" => out.push(expr),
                        _ => exprs(value, out),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| exprs(v, out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    exprs(dashboard, &mut found);
    let mut names = std::collections::BTreeSet::new();
    for expr in found {
        for prefix in ["rebound_", "process_"] {
            for (at, _) in expr.match_indices(prefix) {
                let name: String = expr[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                names.insert(name.strip_suffix("_bucket").unwrap_or(&name).to_owned());
            }
        }
    }
    names
}

#[tokio::test(flavor = "multi_thread")]
async fn the_compose_stack_scrapes_what_its_dashboard_draws() {
    let root = root();
    let dashboard: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(root.join("docker/grafana/dashboards/rebound.json")).unwrap(),
    )
    .expect("the dashboard is JSON");
    let names = dashboard_metrics(&dashboard);
    assert!(names.len() > 10, "{names:?}");
    let variables: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .expect("dashboard variables")
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(variables, ["address", "queue"]);
    for drawn in [
        "rebound_queue_outage",
        "rebound_address_bytes",
        "rebound_address_blocked_sends",
        "rebound_queue_paged_messages",
        "rebound_dead_letter_address",
    ] {
        assert!(names.contains(drawn), "no panel draws {drawn}");
    }
    assert!(
        !dashboard.to_string().to_lowercase().contains("dlq"),
        "dead-letter queues are found by the relation, not by name"
    );

    // The compose config: docker/rebound.toml with the HTTP endpoint on every
    // interface (which needs users), a client user and Prometheus's `monitor`.
    let compose = fs::read_to_string(root.join("docker/compose.yml")).unwrap();
    assert!(compose.contains("./compose-rebound.toml:/etc/rebound/rebound.toml:ro"));
    let prometheus = fs::read_to_string(root.join("docker/prometheus.yml")).unwrap();
    assert!(prometheus.contains("username: monitor") && prometheus.contains("password_file:"));
    // The host Prometheus names is the container's own name, which the endpoint answers to.
    assert!(prometheus.contains("targets: [\"rebound:8161\"]") && compose.contains("hostname: rebound"));
    let base = fs::read_to_string(root.join("docker/rebound.toml")).unwrap();
    let config = format!(
        "http-listen = \"0.0.0.0:0\"\n{base}\n{}{}",
        crate::permissions::users(&[("app", &["app"]), ("monitor", &["monitor"])]),
        r##"
[[security-settings]]
match = "#"
send = ["app"]
consume = ["app"]
browse = ["app", "monitor"]
create-address = ["app"]
create-queue = ["app"]
manage = ["app"]

[[address-settings]]
match = "orders"
dead-letter-address = "DLA"

[[addresses]]
name = "orders"
  [[addresses.queues]]
  name = "orders"

[[addresses]]
name = "DLA"
  [[addresses.queues]]
  name = "DLQ.orders"
"##
    );
    let broker = Broker::start_with_config(&config).await;
    let url = format!("{}/metrics", broker.http_url().await);
    let login = Some(("monitor", crate::permissions::PASSWORD));
    let answer = crate::support::http_exchange("GET", &url, None, login).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let served: std::collections::BTreeSet<&str> = answer
        .body
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let missing: Vec<&String> = names
        .iter()
        .filter(|name| !served.contains(name.as_str()) && !served.contains(format!("{name}_bucket").as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "the dashboard uses metrics /metrics lacks: {missing:?}"
    );
}

/// The alerting rules load in Prometheus (`promtool check rules`) and fire on
/// the series each is about, the dead-letter queue found by the dead-letter
/// relation (`promtool test rules`); the compose stack's Prometheus loads them,
/// and the broker exports every metric they use.
#[tokio::test(flavor = "multi_thread")]
async fn the_alerting_rules_pass_promtool_and_use_the_broker_s_metrics() {
    let docker = root().join("docker");
    let prometheus = fs::read_to_string(docker.join("prometheus.yml")).unwrap();
    assert!(
        prometheus.contains("/etc/prometheus/rebound-alerts.yml"),
        "{prometheus}"
    );
    let compose = fs::read_to_string(docker.join("compose.yml")).unwrap();
    assert!(compose.contains("./rebound-alerts.yml:/etc/prometheus/rebound-alerts.yml:ro"));
    let rules = fs::read_to_string(docker.join("rebound-alerts.yml")).unwrap();
    let names = metric_names(&rules);
    assert!(names.contains("rebound_dead_letter_address"), "{names:?}");
    assert!(
        !rules.to_lowercase().contains("dlq"),
        "dead-letter queues are found by the relation, not by name"
    );
    // A dead letter makes the dead-letter address (and its metric).
    let broker = Broker::start_with_config(crate::console::POISON_CONFIG).await;
    crate::console::poison(&broker.client().await, "orders", &["x"], "failed").await;
    let (_, scrape) = crate::support::http_get(&format!("{}/metrics", broker.http_url().await)).await;
    let missing: Vec<&String> = names
        .iter()
        .filter(|name| !scrape.contains(&format!("\n{name}")))
        .collect();
    assert!(
        missing.is_empty(),
        "the rules use metrics /metrics lacks: {missing:?}"
    );

    let Ok(promtool) = which("promtool") else {
        crate::support::skipped("promtool is missing (Debian: apt-get install prometheus)");
        return;
    };
    for args in [
        ["check", "rules", "rebound-alerts.yml"],
        ["test", "rules", "rebound-alerts.test.yml"],
    ] {
        let out = std::process::Command::new(&promtool)
            .args(args)
            .current_dir(&docker)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "promtool {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The metric names (`rebound_*`, `up` aside) a rules file's expressions use.
fn metric_names(rules: &str) -> std::collections::BTreeSet<String> {
    rules
        .match_indices("rebound_")
        .map(|(at, _)| {
            rules[at..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect::<String>()
        })
        .filter(|name| name.len() > "rebound_".len())
        .collect()
}

/// Where `program` is on PATH.
fn which(program: &str) -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
        .ok_or(())
}
