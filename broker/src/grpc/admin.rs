//! `rebound.v1.Admin`: addresses, queues, counters, browsing, settings.
//!
//! Every call is checked against the security in force before it acts
//! (`security/access.rs` says what each needs); the operations that change
//! addresses, queues or queued messages are written to the audit log with their
//! outcome.
//!
//! The calls about one queue's messages and counters go to the node that
//! serves the queue when several brokers share one database (`cluster/proxy.rs`),
//! which checks and audits them.
use std::sync::Arc;

use rebound_protocol::v1 as pb;
use tonic::{Request, Response, Status};

use super::cluster::Nodes;
use super::cluster::proxy;
use super::convert::{
    address_info, browsed_to_wire, queue_info, retry_outcome_to_wire, routing_from_wire, selection_from_wire,
};
use crate::engine::{AddressView, Broker};
use crate::metrics::{cpu_micros, status_bytes};
use crate::security::access::{self, Caller, Kind, Operation};
use crate::security::{Security, audit};

const DEFAULT_BROWSE_LIMIT: usize = 200;

pub struct AdminService {
    broker: Arc<Broker>,
    security: Arc<Security>,
    nodes: Arc<Nodes>,
}

impl AdminService {
    pub fn new(broker: Arc<Broker>, security: Arc<Security>, nodes: Arc<Nodes>) -> AdminService {
        AdminService {
            broker,
            security,
            nodes,
        }
    }

    /// Where the node serving the queue `queue` names is, if another node
    /// serves it and the call was not forwarded here already (`cluster/proxy.rs`).
    async fn owner<T>(
        &self,
        request: &Request<T>,
        queue: impl FnOnce(&T) -> Option<&String>,
    ) -> Option<String> {
        if proxy::was_forwarded(request) {
            return None;
        }
        let name = queue(request.get_ref())?.clone();
        self.broker.cluster().owner_of_soon(&name).await
    }

    /// Replaces the figures of the queues other nodes serve by theirs (asked
    /// of each node at once, with the caller's `credentials`: see
    /// [`asking_others`]), so that a listing through any node shows the
    /// cluster's queues as their nodes see them. A queue whose node cannot
    /// answer keeps this node's view (its messages are counted by the node
    /// serving it).
    async fn figures_of_owners(&self, queues: &mut [pb::QueueInfo], credentials: Option<proxy::Credentials>) {
        let Some(credentials) = credentials else {
            return;
        };
        let mut by_owner: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for info in queues.iter() {
            if let Some(owner) = self.broker.cluster().owner_of(&info.name) {
                by_owner.entry(owner).or_default().push(info.name.clone());
            }
        }
        let asked = by_owner
            .into_iter()
            .map(|(owner, names)| proxy::queue_infos(&self.nodes, owner, names, &credentials));
        for remote in futures::future::join_all(asked).await.into_iter().flatten() {
            if let Some(info) = queues.iter_mut().find(|q| q.name == remote.name) {
                *info = remote;
            }
        }
    }

    /// `addresses` with the gauges of their queues summed, those of queues
    /// other nodes serve as those nodes see them
    /// ([`AdminService::figures_of_owners`]).
    async fn address_infos(
        &self,
        addresses: &[AddressView],
        credentials: Option<proxy::Credentials>,
    ) -> Vec<pb::AddressInfo> {
        let mut queues: Vec<pb::QueueInfo> = addresses
            .iter()
            .flat_map(|a| &a.queues)
            .map(|q| queue_info(q, self.broker.cluster().served_by(q)))
            .collect();
        self.figures_of_owners(&mut queues, credentials).await;
        let mut queues = queues.into_iter();
        addresses
            .iter()
            .map(|a| address_info(a, &queues.by_ref().take(a.queues.len()).collect::<Vec<_>>()))
            .collect()
    }

    /// Checks `operation` for `caller` under the security in force.
    fn authorize(&self, caller: &Caller, operation: &Operation<'_>) -> Result<(), Status> {
        Ok(access::authorize(&self.security.policy(), caller, operation)?)
    }
}

/// Carries out a checked management operation and writes its audit line
/// ([`audit::carried_out`]).
async fn managed<T>(
    caller: &Caller,
    operation: &Operation<'_>,
    messages: impl FnOnce(&T) -> Option<u64>,
    work: impl Future<Output = crate::error::Result<T>>,
) -> Result<T, Status> {
    Ok(audit::carried_out(caller, operation, messages, work).await?)
}

/// The caller's credentials, to ask the nodes serving queues for their
/// figures; `None` when another node forwarded the call here (that node asks
/// them itself).
fn asking_others<T>(request: &Request<T>) -> Option<proxy::Credentials> {
    (!proxy::was_forwarded(request)).then(|| proxy::Credentials::of(request))
}

/// The queue a request's selection names, if it has one.
fn selected(selection: &Option<pb::MessageSelection>) -> Option<&String> {
    selection.as_ref().map(|s| &s.queue)
}

/// No message count, for operations on addresses and queues themselves.
fn none<T>(_: &T) -> Option<u64> {
    None
}

#[tonic::async_trait]
impl pb::admin_server::Admin for AdminService {
    async fn create_address(
        &self,
        request: Request<pb::CreateAddressRequest>,
    ) -> Result<Response<pb::CreateAddressResponse>, Status> {
        let caller = Caller::of(&request);
        let r = request.into_inner();
        let routing = routing_from_wire(r.routing_type)?;
        let operation = Operation::create_address(&r.name);
        self.authorize(&caller, &operation)?;
        let work = self.broker.create_address(&r.name, routing);
        let created = managed(&caller, &operation, none, work).await?;
        Ok(Response::new(pb::CreateAddressResponse { created }))
    }

    async fn delete_address(
        &self,
        request: Request<pb::DeleteAddressRequest>,
    ) -> Result<Response<pb::DeleteAddressResponse>, Status> {
        let caller = Caller::of(&request);
        let r = request.into_inner();
        let operation = Operation::delete_address(&self.broker, &r.name, r.force);
        self.authorize(&caller, &operation)?;
        let work = self.broker.delete_address(&r.name, r.force);
        managed(&caller, &operation, none, work).await?;
        Ok(Response::new(pb::DeleteAddressResponse {}))
    }

    async fn create_queue(
        &self,
        request: Request<pb::CreateQueueRequest>,
    ) -> Result<Response<pb::CreateQueueResponse>, Status> {
        let caller = Caller::of(&request);
        let r = request.into_inner();
        let routing = routing_from_wire(r.routing_type)?;
        let operation = Operation::create_queue(&self.broker, &r.address, &r.queue);
        self.authorize(&caller, &operation)?;
        let work = self.broker.create_queue(
            &r.address,
            &r.queue,
            routing,
            r.durable.unwrap_or(true),
            None,
            false,
        );
        let queue = managed(&caller, &operation, none, work).await?;
        Ok(Response::new(pb::CreateQueueResponse {
            queue: Some(queue_info(&queue, self.broker.cluster().served_by(&queue))),
        }))
    }

    async fn delete_queue(
        &self,
        request: Request<pb::DeleteQueueRequest>,
    ) -> Result<Response<pb::DeleteQueueResponse>, Status> {
        let caller = Caller::of(&request);
        let queue = request.into_inner().queue;
        let operation = Operation::on_queue(&self.broker, Kind::DeleteQueue, &queue);
        self.authorize(&caller, &operation)?;
        managed(&caller, &operation, none, self.broker.delete_queue(&queue)).await?;
        Ok(Response::new(pb::DeleteQueueResponse {}))
    }

    async fn list_queues(
        &self,
        request: Request<pb::ListQueuesRequest>,
    ) -> Result<Response<pb::ListQueuesResponse>, Status> {
        let caller = Caller::of(&request);
        let credentials = asking_others(&request);
        let r = request.into_inner();
        let policy = self.security.policy();
        let shown = |q: &crate::queue::Queue| access::may_browse(&policy, &caller, &q.address);
        let page = self
            .broker
            .management()
            .queues_page(&r.page_token, page_size(r.page_size), shown);
        let mut queues: Vec<pb::QueueInfo> = page
            .items
            .iter()
            .map(|q| queue_info(q, self.broker.cluster().served_by(q)))
            .collect();
        self.figures_of_owners(&mut queues, credentials).await;
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
        if let Some(owner) = self.owner(&request, |r| Some(&r.queue)).await {
            return proxy::admin(&self.nodes, owner, request, |mut c, r| async move {
                c.get_queue(r).await
            })
            .await;
        }
        let caller = Caller::of(&request);
        let name = request.into_inner().queue;
        self.authorize(&caller, &Operation::on_queue(&self.broker, Kind::Browse, &name))?;
        let queue = self.broker.queue(&name)?;
        Ok(Response::new(pb::GetQueueResponse {
            queue: Some(queue_info(&queue, self.broker.cluster().served_by(&queue))),
        }))
    }

    async fn browse_queue(
        &self,
        request: Request<pb::BrowseQueueRequest>,
    ) -> Result<Response<pb::BrowseQueueResponse>, Status> {
        if let Some(owner) = self.owner(&request, |r| Some(&r.queue)).await {
            return proxy::admin(&self.nodes, owner, request, |mut c, r| async move {
                c.browse_queue(r).await
            })
            .await;
        }
        let caller = Caller::of(&request);
        let r = request.into_inner();
        self.authorize(
            &caller,
            &Operation::on_queue(&self.broker, Kind::Browse, &r.queue),
        )?;
        let limit = if r.limit == 0 {
            DEFAULT_BROWSE_LIMIT
        } else {
            r.limit as usize
        };
        let messages = self
            .broker
            .management()
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
        if let Some(owner) = self.owner(&request, |r| Some(&r.queue)).await {
            return proxy::admin(&self.nodes, owner, request, |mut c, r| async move {
                c.purge_queue(r).await
            })
            .await;
        }
        let caller = Caller::of(&request);
        let queue = request.into_inner().queue;
        let operation = Operation::on_queue(&self.broker, Kind::Purge, &queue);
        self.authorize(&caller, &operation)?;
        let removed = managed(
            &caller,
            &operation,
            |&n| Some(n),
            self.broker.management().purge(&queue),
        )
        .await?;
        Ok(Response::new(pb::PurgeQueueResponse { removed }))
    }

    async fn count_messages(
        &self,
        request: Request<pb::CountMessagesRequest>,
    ) -> Result<Response<pb::CountMessagesResponse>, Status> {
        if let Some(owner) = self.owner(&request, |r| selected(&r.selection)).await {
            return proxy::admin(&self.nodes, owner, request, |mut c, r| async move {
                c.count_messages(r).await
            })
            .await;
        }
        let caller = Caller::of(&request);
        let selection = selection_from_wire(request.into_inner().selection)?;
        let operation = Operation::on_queue(&self.broker, Kind::Browse, &selection.queue);
        self.authorize(&caller, &operation)?;
        let count = self.broker.management().count_messages(&selection)?;
        Ok(Response::new(pb::CountMessagesResponse { count }))
    }

    async fn remove_messages(
        &self,
        request: Request<pb::RemoveMessagesRequest>,
    ) -> Result<Response<pb::RemoveMessagesResponse>, Status> {
        if let Some(owner) = self.owner(&request, |r| selected(&r.selection)).await {
            return proxy::admin(&self.nodes, owner, request, |mut c, r| async move {
                c.remove_messages(r).await
            })
            .await;
        }
        let caller = Caller::of(&request);
        let selection = selection_from_wire(request.into_inner().selection)?;
        let operation = Operation::on_queue(&self.broker, Kind::Remove, &selection.queue);
        self.authorize(&caller, &operation)?;
        let work = self.broker.management().remove_messages(&selection);
        let removed = managed(&caller, &operation, |&n| Some(n), work).await?;
        Ok(Response::new(pb::RemoveMessagesResponse { removed }))
    }

    async fn move_messages(
        &self,
        request: Request<pb::MoveMessagesRequest>,
    ) -> Result<Response<pb::MoveMessagesResponse>, Status> {
        if let Some(owner) = self.owner(&request, |r| selected(&r.selection)).await {
            return proxy::admin(&self.nodes, owner, request, |mut c, r| async move {
                c.move_messages(r).await
            })
            .await;
        }
        let caller = Caller::of(&request);
        let r = request.into_inner();
        let selection = selection_from_wire(r.selection)?;
        let operation = Operation::move_to(&self.broker, &selection.queue, &r.to_address);
        self.authorize(&caller, &operation)?;
        let work = self.broker.management().move_messages(&selection, &r.to_address);
        let moved = managed(&caller, &operation, |&n| Some(n), work).await?;
        Ok(Response::new(pb::MoveMessagesResponse { moved }))
    }

    async fn retry_messages(
        &self,
        request: Request<pb::RetryMessagesRequest>,
    ) -> Result<Response<pb::RetryMessagesResponse>, Status> {
        if let Some(owner) = self.owner(&request, |r| selected(&r.selection)).await {
            return proxy::admin(&self.nodes, owner, request, |mut c, r| async move {
                c.retry_messages(r).await
            })
            .await;
        }
        let caller = Caller::of(&request);
        let r = request.into_inner();
        let selection = selection_from_wire(r.selection)?;
        let operation = Operation::on_queue(&self.broker, Kind::Retry, &selection.queue);
        self.authorize(&caller, &operation)?;
        let policy = self.security.policy();
        let may_return_to =
            |address: &str| access::may_return_to(&policy, &caller, &selection.queue, address);
        let work = self.broker.management().retry_messages(
            &selection,
            r.dry_run,
            r.rate_per_second,
            r.limit.filter(|&n| n > 0).map(|n| n as usize),
            may_return_to,
        );
        let outcomes = if r.dry_run {
            work.await?
        } else {
            let moved = |outcomes: &Vec<crate::engine::RetryOutcome>| {
                Some(crate::engine::RetryOutcome::moved(outcomes) as u64)
            };
            managed(&caller, &operation, moved, work).await?
        };
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
        let caller = Caller::of(&request);
        let address = request.into_inner().address;
        crate::message::check_name("address", &address)?;
        self.authorize(&caller, &Operation::browse_address(&address))?;
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

    /// Needs no permission: being logged in is enough to see the broker's version,
    /// uptime, memory and store counters.
    async fn get_server_info(
        &self,
        _request: Request<pb::GetServerInfoRequest>,
    ) -> Result<Response<pb::GetServerInfoResponse>, Status> {
        let stats = self.broker.store().stats();
        Ok(Response::new(pb::GetServerInfoResponse {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            uptime_ms: self.broker.uptime().as_millis() as u64,
            // From /proc (Linux); 0 where it cannot be read.
            rss_bytes: status_bytes("VmRSS").unwrap_or(0),
            peak_rss_bytes: status_bytes("VmHWM").unwrap_or(0),
            store_commits: stats.commits,
            store_ops: stats.ops,
            store_syncs: stats.syncs,
            store_disk_bytes: stats.disk_bytes,
            process_cpu_us: cpu_micros().unwrap_or(0),
        }))
    }

    async fn list_addresses(
        &self,
        request: Request<pb::ListAddressesRequest>,
    ) -> Result<Response<pb::ListAddressesResponse>, Status> {
        let caller = Caller::of(&request);
        let credentials = asking_others(&request);
        let r = request.into_inner();
        let policy = self.security.policy();
        let shown = |address: &str| access::may_browse(&policy, &caller, address);
        let page = self
            .broker
            .management()
            .addresses_page(&r.page_token, page_size(r.page_size), shown);
        let addresses = self.address_infos(&page.items, credentials).await;
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
        let caller = Caller::of(&request);
        let credentials = asking_others(&request);
        let name = request.into_inner().name;
        self.authorize(&caller, &Operation::browse_address(&name))?;
        let address = self.broker.management().address(&name)?;
        let mut infos = self.address_infos(&[address], credentials).await;
        Ok(Response::new(pb::GetAddressResponse { address: infos.pop() }))
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
