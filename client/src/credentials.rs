//! Logging in: a user name and password, sent with every call as HTTP basic
//! credentials in the `authorization` metadata (the broker checks each call and
//! stream, and caches what it verified, so this costs little).
//!
//! The password is kept out of sight: `Debug` shows `<redacted>`, and the
//! metadata value is marked sensitive so that HTTP/2 does not index it in its
//! header compression tables.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use crate::{Error, Result};

/// A user name and password to log in with.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    user: String,
    password: String,
}

impl Credentials {
    /// Credentials of `user` (which may not contain `:`) with `password`.
    pub fn new(user: impl Into<String>, password: impl Into<String>) -> Credentials {
        Credentials {
            user: user.into(),
            password: password.into(),
        }
    }

    /// The user name.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The `authorization` metadata value: `Basic base64(user:password)`, sensitive.
    pub(crate) fn header(&self) -> Result<MetadataValue<Ascii>> {
        if self.user.is_empty() || self.user.contains(':') {
            return Err(Error::Credentials(format!(
                "invalid user name {:?}: it must be non-empty and without ':'",
                self.user
            )));
        }
        let encoded = STANDARD.encode(format!("{}:{}", self.user, self.password));
        let mut value: MetadataValue<Ascii> = format!("Basic {encoded}")
            .parse()
            .expect("base64 is valid metadata");
        value.set_sensitive(true);
        Ok(value)
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// The channel every stub of a client uses: the connection, plus the
/// credentials added to each call.
pub(crate) type Transport = InterceptedService<Channel, Authorization>;

/// Adds the `authorization` metadata to every call, if there are credentials.
#[derive(Clone, Debug, Default)]
pub(crate) struct Authorization(pub(crate) Option<MetadataValue<Ascii>>);

impl Interceptor for Authorization {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.0 {
            request.metadata_mut().insert("authorization", value.clone());
        }
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_password_and_the_header_is_basic() {
        let credentials = Credentials::new("alice", "hunter2");
        let debug = format!("{credentials:?}");
        assert!(
            !debug.contains("hunter2") && debug.contains("<redacted>"),
            "{debug}"
        );
        let header = credentials.header().unwrap();
        assert!(header.is_sensitive());
        assert_eq!(
            header.to_str().unwrap(),
            format!("Basic {}", STANDARD.encode("alice:hunter2"))
        );
        assert!(Credentials::new("a:b", "x").header().is_err());
        assert!(Credentials::new("", "x").header().is_err());
    }
}
