//! TLS (issue 13): `[tls]` in the config, `https://` with `--ca-cert` on the
//! client side, mutual TLS, and a certificate renewed by a reload without a
//! restart. Certificates are made by the test (rcgen) in a temporary directory.
use std::path::{Path, PathBuf};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rebound_client::{Client, Error, TlsOptions};
use tempfile::TempDir;

use crate::support::{Broker, rebound, sample};

/// A certificate authority of the test (the auth tests use it too).
pub(crate) struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pub(crate) pem: String,
}

impl Ca {
    pub(crate) fn new(name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let pem = params.self_signed(&key).unwrap().pem();
        Ca {
            issuer: Issuer::new(params, key),
            pem,
        }
    }

    /// A leaf certificate and its key, PEM: for the broker (127.0.0.1 and
    /// localhost) or for a client.
    pub(crate) fn leaf(&self, name: &str, server: bool) -> (String, String) {
        if server {
            let names = ["127.0.0.1", "localhost"];
            self.issue(name, &names, vec![ExtendedKeyUsagePurpose::ServerAuth])
        } else {
            self.issue(name, &[], vec![ExtendedKeyUsagePurpose::ClientAuth])
        }
    }

    /// A cluster node's certificate and key, PEM: for `host` (an IP address
    /// or a name), as a server and as the client it is toward other nodes.
    pub(crate) fn node(&self, name: &str, host: &str) -> (String, String) {
        let usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        self.issue(name, &[host], usages)
    }

    fn issue(&self, name: &str, names: &[&str], usages: Vec<ExtendedKeyUsagePurpose>) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let names = names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = usages;
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// The files of a TLS test: CA, server and client certificates.
pub(crate) struct Pki {
    dir: TempDir,
}

impl Pki {
    pub(crate) fn new() -> Pki {
        Pki {
            dir: tempfile::Builder::new().prefix("rebound-tls-").tempdir().unwrap(),
        }
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes `text` to `name` atomically and returns its path.
    pub(crate) fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        let staged = self.path(&format!("{name}.new"));
        std::fs::write(&staged, text).unwrap();
        std::fs::rename(&staged, &path).unwrap();
        path
    }

    /// Writes the CA and a server certificate of `ca` as ca.pem, server.pem, server.key.
    pub(crate) fn issue_server(&self, ca: &Ca, name: &str) {
        let (cert, key) = ca.leaf(name, true);
        self.write("ca.pem", &ca.pem);
        self.write("server.pem", &cert);
        self.write("server.key", &key);
    }

    /// `[tls]` for the server files, plus `extra` lines.
    pub(crate) fn config(&self, extra: &str) -> String {
        format!(
            "[tls]\ncert-file = {:?}\nkey-file = {:?}\n{extra}\n",
            self.path("server.pem"),
            self.path("server.key")
        )
    }
}

pub(crate) fn https(broker: &Broker) -> String {
    format!("https://{}", broker.addr())
}

pub(crate) fn trusting(ca: &Path) -> TlsOptions {
    TlsOptions {
        ca_cert: Some(ca.to_owned()),
        ..TlsOptions::default()
    }
}

/// A send and a receive through the client over `options`.
async fn round_trip(url: &str, options: &TlsOptions) -> Result<(), Error> {
    let client = Client::connect_with(url, options).await?;
    client
        .send(rebound_client::OutgoingMessage::new("tls", "over tls"))
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_sends_and_receives_over_https_with_ca_cert() {
    let pki = Pki::new();
    pki.issue_server(&Ca::new("rebound test CA"), "broker one");
    let broker = Broker::start_with_config(&pki.config("")).await;
    let ca = pki.path("ca.pem");
    let url = https(&broker);
    let out = rebound([
        "--server".as_ref(),
        url.as_ref(),
        "--ca-cert".as_ref(),
        ca.as_os_str(),
        "send".as_ref(),
        "--address".as_ref(),
        "orders".as_ref(),
        "--body".as_ref(),
        "secret".as_ref(),
    ])
    .await;
    out.success();
    let out = rebound([
        "receive".as_ref(),
        "--queue".as_ref(),
        "orders".as_ref(),
        "--json".as_ref(),
        "--server".as_ref(),
        url.as_ref(),
        "--ca-cert".as_ref(),
        ca.as_os_str(),
    ])
    .await;
    out.success();
    let lines = out.json_lines();
    assert_eq!(lines.len(), 1, "{}", out.stdout);
    assert_eq!(lines[0]["body"], "secret", "{}", out.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn plaintext_and_untrusting_clients_fail_clearly() {
    let pki = Pki::new();
    pki.issue_server(&Ca::new("rebound test CA"), "broker one");
    let broker = Broker::start_with_config(&pki.config("")).await;

    // Plaintext against the TLS port.
    let out = rebound(["queue", "list", "--server", &format!("http://{}", broker.addr())]).await;
    out.failure(1);
    assert!(out.stderr.starts_with("error: "), "{}", out.stderr);
    eprintln!("plaintext: {}", out.stderr);

    // https:// without a CA is refused before dialling.
    let out = rebound(["queue", "list", "--server", &https(&broker)]).await;
    out.failure(1);
    assert!(out.stderr.contains("--ca-cert"), "{}", out.stderr);

    // A CA that did not sign the broker's certificate.
    let other = Pki::new();
    let other_ca = other.write("ca.pem", &Ca::new("someone else").pem);
    let err = round_trip(&https(&broker), &trusting(&other_ca))
        .await
        .unwrap_err();
    eprintln!("untrusted: {err}");
    assert!(matches!(err, Error::Connect { .. }), "{err}");
    assert!(err.to_string().contains("certificate"), "{err}");

    // And the right CA works.
    round_trip(&https(&broker), &trusting(&pki.path("ca.pem")))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_connections_are_counted_and_bounded_by_max_connections() {
    let pki = Pki::new();
    pki.issue_server(&Ca::new("rebound test CA"), "broker one");
    let broker = Broker::start_with_config(&pki.config("[limits]\nmax-connections = 1")).await;
    let options = trusting(&pki.path("ca.pem"));
    let held = Client::connect_with(&https(&broker), &options).await.unwrap();
    held.server_info().await.unwrap();
    let text = broker.scrape().await;
    assert_eq!(sample(&text, "rebound_connections", &[]), Some(1.0), "{text}");

    // The second is closed at accept, before its handshake.
    let refused = round_trip(&https(&broker), &options).await;
    assert!(refused.is_err(), "a second TLS connection was served");
    let text = broker.scrape().await;
    assert!(
        sample(&text, "rebound_connections_refused_total", &[]).unwrap() >= 1.0,
        "{text}"
    );
    held.server_info().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn mutual_tls_refuses_a_client_without_a_certificate() {
    let pki = Pki::new();
    let ca = Ca::new("rebound test CA");
    pki.issue_server(&ca, "broker one");
    let (cert, key) = ca.leaf("client one", false);
    let client_cert = pki.write("client.pem", &cert);
    let client_key = pki.write("client.key", &key);
    // A client certificate from another CA is refused too.
    let (stranger_cert, stranger_key) = Ca::new("someone else").leaf("stranger", false);
    let stranger_cert = pki.write("stranger.pem", &stranger_cert);
    let stranger_key = pki.write("stranger.key", &stranger_key);
    let config = pki.config(&format!(
        "client-ca-file = {:?}\nrequire-client-cert = true",
        pki.path("ca.pem")
    ));
    let broker = Broker::start_with_config(&config).await;
    let url = https(&broker);
    let ca_pem = pki.path("ca.pem");

    let err = round_trip(&url, &trusting(&ca_pem)).await.unwrap_err();
    eprintln!("no client cert: {err}");
    let err = round_trip(
        &url,
        &TlsOptions {
            client_cert: Some(stranger_cert),
            client_key: Some(stranger_key),
            ..trusting(&ca_pem)
        },
    )
    .await
    .unwrap_err();
    eprintln!("stranger: {err}");

    let with_cert = TlsOptions {
        client_cert: Some(client_cert.clone()),
        client_key: Some(client_key.clone()),
        ..trusting(&ca_pem)
    };
    round_trip(&url, &with_cert).await.unwrap();

    // The CLI, with the environment variables instead of the flags.
    let cli = |with_cert: bool| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_rebound"));
        command
            .args(["queue", "stat", "--queue", "tls"])
            .env("REBOUND_SERVER", &url)
            .env("REBOUND_CA_CERT", &ca_pem)
            .env_remove("REBOUND_CLIENT_CERT")
            .env_remove("REBOUND_CLIENT_KEY")
            .env_remove("RUST_LOG")
            .kill_on_drop(true);
        if with_cert {
            command
                .env("REBOUND_CLIENT_CERT", &client_cert)
                .env("REBOUND_CLIENT_KEY", &client_key);
        }
        async move {
            let out = tokio::time::timeout(Duration::from_secs(30), command.output())
                .await
                .expect("rebound finishes")
                .unwrap();
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        }
    };
    let (code, _, stderr) = cli(false).await;
    assert_eq!(code, Some(1), "{stderr}");
    eprintln!("cli without cert: {stderr}");
    let (code, stdout, stderr) = cli(true).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("tls"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_renewed_certificate_is_served_after_a_reload_without_a_restart() {
    let pki = Pki::new();
    let old_ca = Ca::new("old CA");
    pki.issue_server(&old_ca, "broker old");
    let old_ca_pem = pki.write("old-ca.pem", &old_ca.pem);
    let mut broker = Broker::start_with_config(&pki.config("")).await;
    let url = https(&broker);
    round_trip(&url, &trusting(&old_ca_pem)).await.unwrap();
    // A connection made before the renewal, kept open across it.
    let before = Client::connect_with(&url, &trusting(&old_ca_pem)).await.unwrap();

    // Broken files: the reload is rejected and the old certificate stays.
    pki.write("server.pem", "not a certificate\n");
    broker.hup();
    broker.wait_for_log("config reload rejected").await;
    round_trip(&url, &trusting(&old_ca_pem)).await.unwrap();

    // A certificate from a new CA: after SIGHUP new connections get it.
    let new_ca = Ca::new("new CA");
    pki.issue_server(&new_ca, "broker new");
    let new_ca_pem = pki.write("new-ca.pem", &new_ca.pem);
    broker.hup();
    broker.wait_for_log("TLS certificate re-read").await;
    round_trip(&url, &trusting(&new_ca_pem)).await.unwrap();
    let err = round_trip(&url, &trusting(&old_ca_pem)).await.unwrap_err();
    assert!(err.to_string().contains("UnknownIssuer"), "{err}");
    // The connection made before still works, and no restart happened.
    before
        .send(rebound_client::OutgoingMessage::new("tls", "still here"))
        .await
        .unwrap();
    assert_eq!(
        broker.log().matches("daemon: serving").count(),
        1,
        "{}",
        broker.log()
    );
    drop(before);
    let status = broker.terminate().await;
    assert!(status.success(), "a TLS broker shuts down cleanly: {status}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_tls_files_are_config_errors_naming_the_file_and_key() {
    let pki = Pki::new();
    let ca = Ca::new("rebound test CA");
    pki.issue_server(&ca, "broker one");
    let config = pki.path("rebound.toml");
    std::fs::write(&config, pki.config("")).unwrap();
    let check = |config: PathBuf| async move {
        rebound([
            "config".as_ref(),
            "check".as_ref(),
            "--config".as_ref(),
            config.as_os_str(),
        ])
        .await
    };
    check(config.clone()).await.success();

    // A key that is not the certificate's: the broker refuses to start.
    let (_, other_key) = ca.leaf("other", true);
    pki.write("server.key", &other_key);
    let data = pki.path("data");
    let out = rebound([
        "serve".as_ref(),
        "--listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--http-listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--data-dir".as_ref(),
        data.as_os_str(),
        "--config".as_ref(),
        config.as_os_str(),
    ])
    .await;
    out.failure(1);
    assert!(out.stderr.contains("tls.key-file"), "{}", out.stderr);
    assert!(out.stderr.contains("server.key"), "{}", out.stderr);

    // A key file without a key, and a missing certificate file.
    pki.write("server.key", "nothing here\n");
    let out = check(config.clone()).await;
    out.failure(2);
    assert!(out.stderr.contains("tls.key-file: "), "{}", out.stderr);
    assert!(out.stderr.contains("no PEM private key"), "{}", out.stderr);
    std::fs::remove_file(pki.path("server.pem")).unwrap();
    let out = check(config).await;
    out.failure(2);
    assert!(out.stderr.contains("tls.cert-file: "), "{}", out.stderr);
    assert!(
        out.stderr.contains("server.pem: cannot read file"),
        "{}",
        out.stderr
    );
}

/// `rebound tls dev-certs` makes a CA, a server certificate for the hosts
/// given and client certificates: the broker serves TLS with them, a client
/// trusting the CA connects, and one with a client certificate logs in by
/// its name. Existing files are never overwritten.
#[tokio::test(flavor = "multi_thread")]
async fn dev_certs_make_a_ca_a_server_and_client_certificates_that_work() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let certs_arg = certs.to_str().unwrap();
    let made = rebound([
        "tls",
        "dev-certs",
        certs_arg,
        "--host",
        "127.0.0.1",
        "--client",
        "alice",
    ])
    .await;
    assert!(made.status.success(), "{}", made.stderr);
    assert!(made.stdout.contains("cert-file = "), "{}", made.stdout);
    let key_mode = std::fs::metadata(certs.join("server.key")).unwrap().permissions();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&key_mode) & 0o777, 0o600);
    let config = format!(
        "[tls]\ncert-file = {:?}\nkey-file = {:?}\nclient-ca-file = {:?}\n{}",
        certs.join("server.pem"),
        certs.join("server.key"),
        certs.join("ca.pem"),
        crate::permissions::users(&[("alice", &["app"])]),
    );
    let broker = Broker::start_with_config(&config).await;
    let options = TlsOptions {
        ca_cert: Some(certs.join("ca.pem")),
        client_cert: Some(certs.join("client-alice.pem")),
        client_key: Some(certs.join("client-alice.key")),
    };
    Client::connect_with(&https(&broker), &options)
        .await
        .unwrap()
        .health()
        .await
        .unwrap();

    let again = rebound(["tls", "dev-certs", certs_arg]).await;
    assert!(!again.status.success());
    assert!(again.stderr.contains("exists already"), "{}", again.stderr);
}

/// The usual first try, `openssl req -x509`, makes a self-signed CA
/// certificate; TLS refuses one as a server's own. The client says so, and
/// what to do, rather than `CaUsedAsEndEntity`.
#[tokio::test(flavor = "multi_thread")]
async fn a_ca_certificate_as_the_server_s_own_is_refused_with_what_to_do() {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, "127.0.0.1");
    let pki = Pki::new();
    let cert = pki.write("server.pem", &params.self_signed(&key).unwrap().pem());
    pki.write("server.key", &key.serialize_pem());
    let broker = Broker::start_with_config(&pki.config("")).await;
    let err = round_trip(&https(&broker), &trusting(&cert)).await.unwrap_err();
    let message = err.to_string();
    assert!(message.contains("a CA certificate"), "{message}");
    assert!(message.contains("rebound tls dev-certs"), "{message}");
}
