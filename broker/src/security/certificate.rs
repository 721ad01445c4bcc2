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

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, DnType, KeyPair};

    use super::*;

    fn certificate(cn: Option<&str>) -> Vec<u8> {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::OrganizationName, "rebound");
        if let Some(cn) = cn {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        params
            .self_signed(&KeyPair::generate().unwrap())
            .unwrap()
            .der()
            .to_vec()
    }

    #[test]
    fn the_subject_cn_is_the_name() {
        assert_eq!(
            common_name(&certificate(Some("billing service"))).as_deref(),
            Some("billing service")
        );
        assert_eq!(common_name(&certificate(None)), None);
        assert_eq!(common_name(b"not DER"), None);
    }
}
