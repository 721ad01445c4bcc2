//! The data dir holds every message body, so only the broker's user may read it.
//!
//! `rebound serve` sets the process's umask to 077 before it opens the store: every
//! file and directory the store creates is then 0600 or 0700, whatever the umask it
//! was started with. A data dir it creates is 0700. One that exists already is the
//! user's: if group or others have any access to it, it is left as it is and a WARN
//! line says so (changing a directory someone chose is not the broker's call).
use std::fs::DirBuilder;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

use anyhow::Context;
use rustix::fs::Mode;
use tracing::warn;

/// Makes what the broker creates from now on private, then creates `dir` (and any
/// missing parents) 0700, or warns if an existing `dir` is open to other users.
pub fn prepare(dir: &Path) -> anyhow::Result<()> {
    rustix::process::umask(Mode::from_raw_mode(0o077));
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create data dir {}", dir.display()))?;
    let mode = dir
        .metadata()
        .with_context(|| format!("cannot read data dir {}", dir.display()))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        warn!(
            data_dir = %dir.display(),
            mode = %format!("{:o}", mode & 0o777),
            "the data dir is open to other local users, who may read the stored messages; \
             `chmod 700` it"
        );
    }
    Ok(())
}
