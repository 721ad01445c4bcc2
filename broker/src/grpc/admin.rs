//! `rebound.v1.Admin`: addresses, queues, counters, browsing, settings.
use std::sync::Arc;

use rebound_protocol::v1 as pb;
use tonic::{Request, Response, Status};

use super::convert::{
    address_info, browsed_to_wire, queue_info, retry_outcome_to_wire, routing_from_wire, selection_from_wire,
};
use crate::engine::Broker;

const DEFAULT_BROWSE_LIMIT: usize = 200;

pub struct AdminService {
    broker: Arc<Broker>,
}

impl AdminService {
    pub fn new(broker: Arc<Broker>) -> AdminService {
        AdminService { broker }
    }
}

/// Resident and peak resident set size of this process, from /proc (Linux).
fn memory_usage() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[tonic::async_trait]
impl pb::admin_server::Admin for AdminService {
    async fn create_address(
        &self,
        request: Request<pb::CreateAddressRequest>,
    ) -> Result<Response<pb::CreateAddressResponse>, Status> {
        let r = request.into_inner();
        let created = self
            .broker
            .create_address(&r.name, routing_from_wire(r.routing_type)?)
            .await?;
        Ok(Response::new(pb::CreateAddressResponse { created }))
    }

    async fn delete_address(
        &self,
        request: Request<pb::DeleteAddressRequest>,
    ) -> Result<Response<pb::DeleteAddressResponse>, Status> {
        let r = request.into_inner();
        self.broker.delete_address(&r.name, r.force).await?;
        Ok(Response::new(pb::DeleteAddressResponse {}))
    }

    async fn create_queue(
        &self,
        request: Request<pb::CreateQueueRequest>,
    ) -> Result<Response<pb::CreateQueueResponse>, Status> {
        let r = request.into_inner();
        let queue = self
            .broker
            .create_queue(
                &r.address,
                &r.queue,
                routing_from_wire(r.routing_type)?,
                r.durable.unwrap_or(true),
                None,
                false,
            )
            .await?;
        Ok(Response::new(pb::CreateQueueResponse {
            queue: Some(queue_info(&queue)),
        }))
    }

    async fn delete_queue(
        &self,
        request: Request<pb::DeleteQueueRequest>,
    ) -> Result<Response<pb::DeleteQueueResponse>, Status> {
        self.broker.delete_queue(&request.into_inner().queue).await?;
        Ok(Response::new(pb::DeleteQueueResponse {}))
    }

    async fn list_queues(
        &self,
        request: Request<pb::ListQueuesRequest>,
    ) -> Result<Response<pb::ListQueuesResponse>, Status> {
        let r = request.into_inner();
        let page = self.broker.queues_page(&r.page_token, page_size(r.page_size));
        let queues: Vec<pb::QueueInfo> = page.items.iter().map(|q| queue_info(q)).collect();
        let next_page_token = next_page_token(page.more, queues.last().map(|q| &q.name));
        Ok(Response::new(pb::ListQueuesResponse {
            queues,
            next_page_token,
        }))
    }

    async fn get_queue(
        &self,
        request: Request<pb::GetQueueRequest>,
    ) -> Result<Response<pb::GetQueueResponse>, Status> {
        let queue = self.broker.queue(&request.into_inner().queue)?;
        Ok(Response::new(pb::GetQueueResponse {
            queue: Some(queue_info(&queue)),
        }))
    }

    async fn browse_queue(
        &self,
        request: Request<pb::BrowseQueueRequest>,
    ) -> Result<Response<pb::BrowseQueueResponse>, Status> {
        let r = request.into_inner();
        let limit = if r.limit == 0 {
            DEFAULT_BROWSE_LIMIT
        } else {
            r.limit as usize
        };
        let messages = self
            .broker
            .browse(&r.queue, &r.filter, limit)?
            .into_iter()
            .map(browsed_to_wire)
            .collect();
        Ok(Response::new(pb::BrowseQueueResponse { messages }))
    }

    async fn purge_queue(
        &self,
        request: Request<pb::PurgeQueueRequest>,
    ) -> Result<Response<pb::PurgeQueueResponse>, Status> {
        let removed = self.broker.purge(&request.into_inner().queue).await?;
        Ok(Response::new(pb::PurgeQueueResponse { removed }))
    }

    async fn count_messages(
        &self,
        request: Request<pb::CountMessagesRequest>,
    ) -> Result<Response<pb::CountMessagesResponse>, Status> {
        let selection = selection_from_wire(request.into_inner().selection)?;
        let count = self.broker.count_messages(&selection)?;
        Ok(Response::new(pb::CountMessagesResponse { count }))
    }

    async fn remove_messages(
        &self,
        request: Request<pb::RemoveMessagesRequest>,
    ) -> Result<Response<pb::RemoveMessagesResponse>, Status> {
        let selection = selection_from_wire(request.into_inner().selection)?;
        let removed = self.broker.remove_messages(&selection).await?;
        Ok(Response::new(pb::RemoveMessagesResponse { removed }))
    }

    async fn move_messages(
        &self,
        request: Request<pb::MoveMessagesRequest>,
    ) -> Result<Response<pb::MoveMessagesResponse>, Status> {
        let r = request.into_inner();
        let selection = selection_from_wire(r.selection)?;
        let moved = self.broker.move_messages(&selection, &r.to_address).await?;
        Ok(Response::new(pb::MoveMessagesResponse { moved }))
    }

    async fn retry_messages(
        &self,
        request: Request<pb::RetryMessagesRequest>,
    ) -> Result<Response<pb::RetryMessagesResponse>, Status> {
        let r = request.into_inner();
        let selection = selection_from_wire(r.selection)?;
        let outcomes = self
            .broker
            .retry_messages(
                &selection,
                r.dry_run,
                r.rate_per_second,
                r.limit.filter(|&n| n > 0).map(|n| n as usize),
            )
            .await?;
        let skipped = outcomes.iter().filter(|o| o.skipped.is_some()).count() as u64;
        let moved = if r.dry_run {
            0
        } else {
            outcomes.len() as u64 - skipped
        };
        let outcomes = outcomes.into_iter().map(retry_outcome_to_wire).collect();
        Ok(Response::new(pb::RetryMessagesResponse {
            moved,
            skipped,
            outcomes,
        }))
    }

    async fn get_settings(
        &self,
        request: Request<pb::GetSettingsRequest>,
    ) -> Result<Response<pb::GetSettingsResponse>, Status> {
        let address = request.into_inner().address;
        crate::message::check_name("address", &address)?;
        let resolved = self.broker.resolve_settings(&address);
        let settings = resolved
            .entries
            .iter()
            .map(|e| pb::SettingValue {
                key: e.key.to_owned(),
                value: e.value.clone(),
                source: e.source.to_string(),
            })
            .collect();
        Ok(Response::new(pb::GetSettingsResponse { address, settings }))
    }

    async fn get_server_info(
        &self,
        _request: Request<pb::GetServerInfoRequest>,
    ) -> Result<Response<pb::GetServerInfoResponse>, Status> {
        let (rss, peak) = memory_usage();
        let stats = self.broker.store().stats();
        Ok(Response::new(pb::GetServerInfoResponse {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            uptime_ms: self.broker.uptime().as_millis() as u64,
            rss_bytes: rss,
            peak_rss_bytes: peak,
            store_commits: stats.commits,
            store_ops: stats.ops,
            store_syncs: stats.syncs,
            store_disk_bytes: stats.disk_bytes,
        }))
    }

    async fn list_addresses(
        &self,
        request: Request<pb::ListAddressesRequest>,
    ) -> Result<Response<pb::ListAddressesResponse>, Status> {
        let r = request.into_inner();
        let page = self.broker.addresses_page(&r.page_token, page_size(r.page_size));
        let addresses: Vec<pb::AddressInfo> = page.items.iter().map(address_info).collect();
        let next_page_token = next_page_token(page.more, addresses.last().map(|a| &a.name));
        Ok(Response::new(pb::ListAddressesResponse {
            addresses,
            next_page_token,
        }))
    }

    async fn get_address(
        &self,
        request: Request<pb::GetAddressRequest>,
    ) -> Result<Response<pb::GetAddressResponse>, Status> {
        let address = self.broker.address(&request.into_inner().name)?;
        Ok(Response::new(pb::GetAddressResponse {
            address: Some(address_info(&address)),
        }))
    }
}

/// Entries per page of ListQueues and ListAddresses when the client asks for none,
/// and the most it may ask for: 1000 queues are about 45 kB on the wire.
const MAX_PAGE_SIZE: usize = 1000;

/// A request's `page_size` as the engine takes it: 0 = the default, capped.
fn page_size(requested: u32) -> usize {
    match requested as usize {
        0 => MAX_PAGE_SIZE,
        n => n.min(MAX_PAGE_SIZE),
    }
}

/// The token of the page after one that ends at `last`: the name itself (the next
/// page starts after it); empty when no page follows.
fn next_page_token(more: bool, last: Option<&String>) -> String {
    match last {
        Some(name) if more => name.clone(),
        _ => String::new(),
    }
}
