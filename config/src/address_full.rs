//! What happens when an address (or the whole broker) holds as many bytes as it
//! may: the `address-full-policy` address-setting and the top-level
//! `global-max-size`, with Artemis's names and meanings.

use std::fmt;
use std::str::FromStr;

/// What a send to a full address does, as in Artemis's `address-full-policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressFullPolicy {
    /// Accept; the messages beyond the limit are kept on disk rather than in
    /// memory (the default).
    Page,
    /// Make the producer wait until the address has room again.
    Block,
    /// Refuse the send (`RESOURCE_EXHAUSTED`).
    Fail,
    /// Acknowledge the send and discard the message.
    Drop,
}

impl AddressFullPolicy {
    /// `"PAGE"`, `"BLOCK"`, `"FAIL"` or `"DROP"`.
    pub fn as_str(self) -> &'static str {
        match self {
            AddressFullPolicy::Page => "PAGE",
            AddressFullPolicy::Block => "BLOCK",
            AddressFullPolicy::Fail => "FAIL",
            AddressFullPolicy::Drop => "DROP",
        }
    }
}

impl fmt::Display for AddressFullPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string other than the four policies.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("expected \"PAGE\", \"BLOCK\", \"FAIL\" or \"DROP\" (got {0:?})")]
pub struct UnknownAddressFullPolicy(pub String);

impl FromStr for AddressFullPolicy {
    type Err = UnknownAddressFullPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "PAGE" => Ok(AddressFullPolicy::Page),
            "BLOCK" => Ok(AddressFullPolicy::Block),
            "FAIL" => Ok(AddressFullPolicy::Fail),
            "DROP" => Ok(AddressFullPolicy::Drop),
            _ => Err(UnknownAddressFullPolicy(s.to_owned())),
        }
    }
}

/// `global-max-size`: the bytes all addresses together may hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GlobalMaxSize {
    /// Not set: half of the memory the broker may use (the machine's, or its
    /// cgroup's limit when lower), as Artemis takes half of the JVM's heap.
    #[default]
    Auto,
    /// `-1`: no broker-wide limit.
    Unlimited,
    /// A number of bytes.
    Bytes(u64),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_strings() {
        use AddressFullPolicy::*;
        for policy in [Page, Block, Fail, Drop] {
            assert_eq!(policy.as_str().parse::<AddressFullPolicy>(), Ok(policy));
            assert_eq!(policy.to_string(), policy.as_str());
        }
        assert_eq!(
            "block".parse::<AddressFullPolicy>(),
            Err(UnknownAddressFullPolicy("block".into()))
        );
    }
}
