//! `rebound user`: offline help with `[[users]]`. `hash-password` reads a
//! password from stdin (so that it shows neither in `ps` nor in the shell's
//! history) and prints its argon2id hash for `password-hash`.

use std::io::BufRead as _;

use anyhow::{Context as _, bail};

/// `rebound user ...`.
#[derive(Debug, clap::Subcommand)]
pub enum UserCommand {
    /// Read a password from stdin (one line) and print its argon2id hash, for a
    /// `[[users]]` entry's `password-hash`.
    HashPassword,
}

pub fn run(command: UserCommand) -> anyhow::Result<()> {
    match command {
        UserCommand::HashPassword => {
            let mut line = String::new();
            std::io::stdin()
                .lock()
                .read_line(&mut line)
                .context("cannot read the password from stdin")?;
            let password = line.strip_suffix('\n').unwrap_or(&line);
            let password = password.strip_suffix('\r').unwrap_or(password);
            if password.is_empty() {
                bail!("empty password: give the password on stdin, e.g. `rebound user hash-password < file`");
            }
            outln!("{}", rebound_broker::security::password::hash(password))?;
            Ok(())
        }
    }
}
