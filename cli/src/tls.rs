//! `rebound tls dev-certs DIR`: certificates to try TLS with, as CockroachDB's
//! `cert` commands make them. A self-signed `openssl req -x509` certificate is
//! a CA certificate, which TLS refuses as a server's own; this makes a CA, a
//! server certificate it signs for the given host names and addresses, and
//! optionally client certificates (a user logs in with one by its name).
//! For development and tests: production certificates come from the
//! operator's own CA.
use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// `rebound tls ...`.
#[derive(Debug, clap::Subcommand)]
pub enum TlsCommand {
    /// Make a CA, a server certificate signed by it, and client certificates,
    /// for trying TLS and mutual TLS (not for production).
    DevCerts(DevCertsArgs),
}

#[derive(Debug, clap::Args)]
pub struct DevCertsArgs {
    /// Where to write ca.pem, ca.key, server.pem, server.key and
    /// client-NAME.pem/.key (created if missing; existing files are never
    /// overwritten).
    dir: PathBuf,
    /// A host name or IP address clients connect to, one per flag; the
    /// server certificate names them. Default: localhost, 127.0.0.1 and ::1.
    #[arg(long = "host", value_name = "NAME")]
    hosts: Vec<String>,
    /// Also make a client certificate for user NAME (its common name), one
    /// per flag.
    #[arg(long = "client", value_name = "NAME")]
    clients: Vec<String>,
    /// How long the certificates are valid, in days.
    #[arg(long, default_value_t = 365)]
    days: u32,
}

pub fn run(command: TlsCommand) -> anyhow::Result<()> {
    match command {
        TlsCommand::DevCerts(args) => dev_certs(&args),
    }
}

fn dev_certs(args: &DevCertsArgs) -> anyhow::Result<()> {
    let hosts = match args.hosts.is_empty() {
        true => vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()],
        false => args.hosts.clone(),
    };
    let mut files = vec!["ca.pem", "ca.key", "server.pem", "server.key"]
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    for client in &args.clients {
        files.extend([format!("client-{client}.pem"), format!("client-{client}.key")]);
    }
    if let Some(existing) = files.iter().map(|f| args.dir.join(f)).find(|p| p.exists()) {
        bail!(
            "{} exists already: choose another directory, or move it away",
            existing.display()
        );
    }
    std::fs::create_dir_all(&args.dir).with_context(|| format!("cannot create {}", args.dir.display()))?;
    let validity = Validity::days(args.days);

    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.distinguished_name
        .push(DnType::CommonName, "rebound development CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    validity.apply(&mut ca);
    let ca_pem = ca.self_signed(&ca_key)?.pem();
    let issuer = Issuer::new(ca, ca_key);
    write(&args.dir, "ca.pem", &ca_pem, 0o644)?;
    write(&args.dir, "ca.key", &issuer.key().serialize_pem(), 0o600)?;

    // Server and client of the other nodes of a cluster alike.
    let usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let (cert, key) = leaf(&issuer, "rebound", hosts.clone(), usages, validity)?;
    write(&args.dir, "server.pem", &cert, 0o644)?;
    write(&args.dir, "server.key", &key, 0o600)?;
    for client in &args.clients {
        let (cert, key) = leaf(
            &issuer,
            client,
            Vec::new(),
            vec![ExtendedKeyUsagePurpose::ClientAuth],
            validity,
        )?;
        write(&args.dir, &format!("client-{client}.pem"), &cert, 0o644)?;
        write(&args.dir, &format!("client-{client}.key"), &key, 0o600)?;
    }

    let dir = std::path::absolute(&args.dir)?;
    let at = |file: &str| dir.join(file).display().to_string();
    outln!("made in {} for {}:", dir.display(), hosts.join(", "))?;
    outln!()?;
    outln!("# the broker's config")?;
    outln!("[tls]")?;
    outln!("cert-file = {:?}", at("server.pem"))?;
    outln!("key-file = {:?}", at("server.key"))?;
    if !args.clients.is_empty() {
        outln!(
            "client-ca-file = {:?}   # clients log in with their certificates",
            at("ca.pem")
        )?;
    }
    outln!()?;
    outln!("# a client")?;
    let mut client = format!(
        "rebound health --server https://{}:61616 --ca-cert {}",
        host_in_url(&hosts[0]),
        at("ca.pem")
    );
    if let Some(name) = args.clients.first() {
        let (cert, key) = (
            at(&format!("client-{name}.pem")),
            at(&format!("client-{name}.key")),
        );
        client.push_str(&format!(" --client-cert {cert} --client-key {key}"));
    }
    outln!("{client}")?;
    Ok(())
}

/// A certificate's validity: from an hour ago (clocks differ a little) for
/// the given days.
#[derive(Clone, Copy)]
struct Validity {
    from: time::OffsetDateTime,
    to: time::OffsetDateTime,
}

impl Validity {
    fn days(days: u32) -> Validity {
        let from = time::OffsetDateTime::now_utc() - time::Duration::hours(1);
        Validity {
            from,
            to: from + time::Duration::days(i64::from(days)),
        }
    }

    fn apply(self, params: &mut CertificateParams) {
        params.not_before = self.from;
        params.not_after = self.to;
    }
}

/// A certificate `issuer` signs for `name` (its common name) and the
/// subject alternative names `hosts`, with `usages`: PEM of it and its key.
fn leaf(
    issuer: &Issuer<'_, KeyPair>,
    name: &str,
    hosts: Vec<String>,
    usages: Vec<ExtendedKeyUsagePurpose>,
    validity: Validity,
) -> anyhow::Result<(String, String)> {
    let key = KeyPair::generate()?;
    let mut params =
        CertificateParams::new(hosts).context("a --host that is neither a name nor an address")?;
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = usages;
    validity.apply(&mut params);
    let cert = params.signed_by(&key, issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Writes `text` to `dir/name` with `mode`, never over an existing file.
fn write(dir: &Path, name: &str, text: &str, mode: u32) -> anyhow::Result<()> {
    let path = dir.join(name);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// `host` as the host of a URL (an IPv6 address in brackets).
fn host_in_url(host: &str) -> String {
    match host.contains(':') {
        true => format!("[{host}]"),
        false => host.to_owned(),
    }
}
