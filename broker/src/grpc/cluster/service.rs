//! `rebound.v1.Cluster`: what the nodes of a cluster call on each other for
//! the callers they act for.
//!
//! `Resolve`: a transaction of the calling node ended, and this node resolves
//! the acks it held for it (`engine/cluster/held.rs`). The answer comes from the
//! database, not from the call, so the call only says when to look; it is
//! authenticated like any other, and resolves only the acks the caller
//! made. On a single broker there is never anything to resolve.
use std::sync::Arc;

use rebound_protocol::v1::{self as pb, cluster_server::Cluster};
use tonic::{Request, Response, Status};

use crate::engine::Broker;
use crate::security::Principal;
use crate::security::access::Caller;

pub struct ClusterService {
    broker: Arc<Broker>,
}

impl ClusterService {
    pub fn new(broker: Arc<Broker>) -> ClusterService {
        ClusterService { broker }
    }
}

#[tonic::async_trait]
impl Cluster for ClusterService {
    async fn resolve(
        &self,
        request: Request<pb::ResolveRequest>,
    ) -> Result<Response<pb::ResolveResponse>, Status> {
        let user = user_of(&Caller::of(&request));
        let pb::ResolveRequest { node, transaction_id } = request.into_inner();
        self.broker
            .cluster()
            .resolve_held(&node, transaction_id, &user)
            .await?;
        Ok(Response::new(pb::ResolveResponse {}))
    }
}

/// The caller's user name, "" when security is off: whom acks held for
/// another node's transaction belong to.
pub(in crate::grpc) fn user_of(caller: &Caller) -> String {
    match &caller.principal {
        Principal::User { name } => name.clone(),
        Principal::Anonymous => String::new(),
    }
}
