//! The `rebound` binary: the broker daemon (`rebound serve`) and the command-line
//! client for a running broker.
//!
//! This file only parses the command line, sets up logging and turns an error
//! into one `error: ...` line and an exit code. `serve` is `rebound_broker::daemon`;
//! `completions` prints a shell completion script generated from the same clap
//! definitions. Each other subcommand (group) is a file of its own, with its clap
//! arguments and a `run`. They reach the broker only through `rebound_client`, the
//! documented way for a Rust program to talk to rebound, so the CLI is that
//! crate's first user. Results go to stdout one record per line; failures are
//! returned as errors for `main` to print as a single `error: ...` line.
//!
//! | file | what |
//! |---|---|
//! | `send.rs` | `rebound send`: copies of one message to an address, on one Publish stream |
//! | `receive.rs` | `rebound receive`: consume, settle and print messages from a queue |
//! | `address.rs` | `rebound address`: create, delete, list and inspect addresses |
//! | `queue.rs`, `queue/` | `rebound queue`: queues, and the operations on their selected messages |
//! | `settings.rs` | `rebound settings`: a running broker's effective address-settings |
//! | `health.rs` | `rebound health`: is the broker serving? |
//! | `config.rs` | `rebound config`: work with a configuration file without a broker |
//! | `user.rs` | `rebound user`: offline help with `[[users]]` (`hash-password`) |
//! | `tls.rs` | `rebound tls dev-certs`: certificates to try TLS with |
//! | `perf.rs` | `rebound perf`: the command line of the `rebound_perf` load generator |
//! | `args.rs` | the arguments the client subcommands share: the global `--server` (TLS, login), `--routing-type` |
//! | `property.rs` | parsing `--property` arguments |
//! | `render.rs` | how messages and queues are shown: a line for people, or a JSON object per line |
//! | `table.rs` | aligned plain-text tables |

use std::io::IsTerminal as _;
use std::num::NonZeroUsize;
use std::process::ExitCode;

use clap::{CommandFactory as _, Parser, Subcommand};
use rebound_broker::daemon;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::field::MakeExt as _;
use tracing_subscriber::fmt::format;

/// mimalloc rather than glibc's malloc: while a backlog drains, the store's
/// checkpointer frees, on its own thread, hundreds of thousands of small
/// blocks a second that other threads allocated, and sled allocates a node
/// for every write it applies; glibc spent some 40% of the checkpointer's
/// CPU in `_int_malloc`/`_int_free` consolidating fragmented free lists.
/// Built without transparent huge pages (`no_thp`): with them an idle broker
/// took 57 MiB of RSS instead of 17. BENCHMARKS.md ("Deep backlogs") has the
/// figures before and after.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (its `mimalloc.h`, v2; libmimalloc-sys
/// names no constant for it).
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

/// Memory freed for this long (ms) goes back to the OS; mimalloc's default
/// is 10. Filling a deep backlog, the broker frees short-lived records by
/// the hundred MB a second, and with the default it kept twice the memory it
/// needs: 40–46 MB more than idle after 5,000,000 messages, ~21 MB with 5 ms
/// (BENCHMARKS.md, "Deep backlogs in page files").
const PURGE_DELAY_MS: std::ffi::c_long = 5;

/// `writeln!` to stdout. Unlike `println!` it returns an error instead of
/// panicking when stdout is closed, e.g. piped into `head`.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout(), $($arg)*)
    }};
}

mod address;
mod args;
mod config;
mod health;
mod perf;
mod property;
mod queue;
mod receive;
mod render;
mod send;
mod settings;
mod table;
mod tls;
mod user;

/// rebound: a message broker modelled on Apache ActiveMQ Artemis, spoken to over gRPC.
#[derive(Debug, Parser)]
#[command(
    name = "rebound",
    version,
    propagate_version = true,
    after_help = "Commands that talk to a broker take --server <URL> (REBOUND_SERVER), --ca-cert, \
                  --client-cert, --client-key, --user and --password, before or after the command."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the broker.
    Serve(ServeCommand),
    /// Send messages to an address.
    Send(send::SendArgs),
    /// Consume messages from a queue, acknowledging (or rejecting) each.
    Receive(receive::ReceiveArgs),
    /// Manage queues and look at their counters and messages.
    #[command(subcommand)]
    Queue(queue::QueueCommand),
    /// Manage addresses.
    #[command(subcommand)]
    Address(address::AddressCommand),
    /// Help with [[users]], offline: hash a password.
    #[command(subcommand)]
    User(user::UserCommand),
    /// Check a configuration file or resolve its settings, offline.
    #[command(subcommand)]
    Config(config::ConfigCommand),
    /// Check that a running broker is serving (gRPC health check): exit 0 if it is.
    Health(health::HealthArgs),
    /// Show a running broker's effective address-settings for an address.
    Settings(settings::SettingsArgs),
    /// Measure a running broker: rates, latency, fsyncs and memory for a named workload.
    Perf(perf::PerfArgs),
    /// Make certificates to try TLS with (`rebound tls dev-certs DIR`).
    #[command(subcommand)]
    Tls(tls::TlsCommand),
    /// Print a shell completion script, e.g. `rebound completions bash > /etc/bash_completion.d/rebound`.
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
}

/// `rebound serve`: the daemon's arguments, and how it logs.
#[derive(Debug, clap::Args)]
struct ServeCommand {
    #[command(flatten)]
    args: daemon::ServeArgs,
    /// Log line format on stderr: `text` for people, `json` (one object per line) for log collectors.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Threads serving clients. Default: one per core.
    #[arg(long, env = "REBOUND_WORKER_THREADS")]
    worker_threads: Option<NonZeroUsize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

fn main() -> ExitCode {
    // SAFETY: sets a documented mimalloc option to a value it accepts;
    // options may be set at any time.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
    let args = args::connection_flags_last(&Cli::command(), std::env::args_os().collect());
    let cli = Cli::parse_from(args);
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    match &cli.command {
        Command::Serve(serve) => {
            init_logging("info", serve.log_format);
            // Without the flag, Tokio's default: one per core.
            if let Some(workers) = serve.worker_threads {
                runtime.worker_threads(workers.get());
            }
        }
        // A client (and `perf`'s load generator) waits on the network, not the
        // CPU: one thread leaves the other cores to a broker on the same machine.
        _ => {
            init_logging("warn", LogFormat::Text);
            runtime.worker_threads(1);
        }
    }
    // Under `--log-format json` a collector reads stderr: the error that ends
    // the broker is a log line like the others.
    let json = matches!(&cli.command, Command::Serve(serve) if serve.log_format == LogFormat::Json);
    match runtime
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)
        .and_then(|rt| rt.block_on(run(cli.command)))
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => report(&err, json),
    }
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve(serve) => daemon::run(serve.args).await,
        Command::Send(args) => send::run(args).await,
        Command::Receive(args) => receive::run(args).await,
        Command::Queue(command) => queue::run(command).await,
        Command::Address(command) => address::run(command).await,
        Command::Config(command) => config::run(command).await,
        Command::Health(args) => health::run(args).await,
        Command::User(command) => user::run(command),
        Command::Tls(command) => tls::run(command),
        Command::Settings(args) => settings::run(args).await,
        Command::Perf(args) => perf::run(args).await,
        Command::Completions { shell } => completions(shell),
    }
}

/// Prints the completion script for `shell`. It is generated from the same clap
/// definitions as the parser, so it cannot fall behind the commands.
fn completions(shell: clap_complete::Shell) -> anyhow::Result<()> {
    use std::io::Write as _;
    // Into a buffer first: clap_complete panics on a failed write (`| head`).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "rebound", &mut script);
    std::io::stdout().write_all(&script)?;
    Ok(())
}

/// Logs go to stderr (stdout is for results), filtered by `RUST_LOG`, coloured
/// only on a terminal so that a log file stays greppable; or as JSON, one object
/// per line with the event's fields at the top level (`target` says
/// `rebound::audit` for the audit log).
///
/// In text, every field and message is written with its control characters escaped
/// ([`rebound_config::escape_controls`]): log lines quote what clients sent
/// (failure reasons, filters, errors that repeat input), and a newline in one
/// must not forge a line of its own, nor an ESC drive the operator's terminal.
/// Escaping here, where all log text passes, covers every log line at once.
fn init_logging(default_filter: &str, format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    if format == LogFormat::Json {
        // JSON strings escape control characters themselves.
        tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
        return;
    }
    let fields = format::debug_fn(|writer, field, value| {
        let text = format!("{value:?}");
        let text = rebound_config::escape_controls(&text);
        match field.name() {
            "message" => write!(writer, "{text}"),
            name => write!(writer, "{name}={text}"),
        }
    })
    .delimited(" ");
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .fmt_fields(fields)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

/// Prints `err` as one line (a JSON log line when `json`) and picks the exit
/// code: 2 for a configuration error (like clap's usage errors; a broker that
/// would listen wide open counts), 1 otherwise. A closed stdout (`| head`) is
/// not an error worth reporting.
fn report(err: &anyhow::Error, json: bool) -> ExitCode {
    let broken_pipe = err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    });
    if broken_pipe {
        return ExitCode::SUCCESS;
    }
    match json {
        true => tracing::error!(error = format!("{err:#}").as_str(), "rebound stopped"),
        false => eprintln!("error: {err:#}"),
    }
    let config_error = |e: &(dyn std::error::Error + 'static)| {
        e.is::<rebound_config::ConfigError>()
            || e.is::<rebound_broker::security::anonymous::AnonymousRefused>()
    };
    if err.chain().any(config_error) {
        ExitCode::from(2)
    } else {
        ExitCode::FAILURE
    }
}
