//! Certificate login (Artemis's): with mutual TLS, a verified client
//! certificate whose subject CN is a user's name logs in as that user.
//!
//! The TLS handshake already checked the certificate against `client-ca-file`;
//! this only reads the name out of it.

use x509_parser::prelude::{FromDer as _, X509Certificate};

/// The subject common name of a DER certificate, if it has one (the first).
pub fn common_name(der: &[u8]) -> Option<String> {
    let (_, certificate) = X509Certificate::from_der(der).ok()?;
    let name = certificate
        .subject()
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_owned();
    Some(name)
}
