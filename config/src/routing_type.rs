//! [`RoutingType`], on its own because the schedule, the address-settings
//! and the address declarations all use it and none of them owns it.

use std::fmt;
use std::str::FromStr;

/// How an address distributes messages, as in Artemis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoutingType {
    /// Point to point: each message goes to one of the address's queues.
    Anycast,
    /// Publish/subscribe: each queue gets a copy.
    Multicast,
}

impl RoutingType {
    /// `"anycast"` or `"multicast"`.
    pub fn as_str(self) -> &'static str {
        match self {
            RoutingType::Anycast => "anycast",
            RoutingType::Multicast => "multicast",
        }
    }
}

impl fmt::Display for RoutingType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string other than `anycast` or `multicast`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("expected `anycast` or `multicast` (got {0:?})")]
pub struct UnknownRoutingType(pub String);

impl FromStr for RoutingType {
    type Err = UnknownRoutingType;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "anycast" => Ok(RoutingType::Anycast),
            "multicast" => Ok(RoutingType::Multicast),
            _ => Err(UnknownRoutingType(s.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_type_strings() {
        for rt in [RoutingType::Anycast, RoutingType::Multicast] {
            assert_eq!(rt.as_str().parse::<RoutingType>(), Ok(rt));
            assert_eq!(rt.to_string(), rt.as_str());
        }
        assert_eq!(
            "Anycast".parse::<RoutingType>(),
            Err(UnknownRoutingType("Anycast".into()))
        );
    }
}
