//! Routing types in the store: the one place that maps the engine's
//! [`RoutingType`] to and from the stored enum (`rebound_storage::RoutingType`).
//! The wire's mapping is the gRPC edge's (`grpc/convert.rs`).
use rebound_config::RoutingType;

pub fn to_store(routing: RoutingType) -> i32 {
    match routing {
        RoutingType::Anycast => rebound_storage::RoutingType::Anycast as i32,
        RoutingType::Multicast => rebound_storage::RoutingType::Multicast as i32,
    }
}

/// An unknown stored value (a record from a newer version) reads as anycast, the
/// routing of an address a send creates by default.
pub fn from_store(value: i32) -> RoutingType {
    if value == rebound_storage::RoutingType::Multicast as i32 {
        RoutingType::Multicast
    } else {
        RoutingType::Anycast
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for routing in [RoutingType::Anycast, RoutingType::Multicast] {
            assert_eq!(from_store(to_store(routing)), routing);
        }
    }
}
