//! The signals that stop the daemon.
use tokio::signal::unix::{Signal, SignalKind, signal};

/// SIGTERM and SIGINT, handled from the moment this is made: made before the
/// ready line, so that a signal right after it is a clean shutdown rather than
/// the default action (death), whenever the server first polls for it.
pub(super) struct StopSignals {
    term: Signal,
    interrupt: Signal,
}

impl StopSignals {
    pub(super) fn arm() -> std::io::Result<StopSignals> {
        Ok(StopSignals {
            term: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
        })
    }

    pub(super) async fn wait(mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}
