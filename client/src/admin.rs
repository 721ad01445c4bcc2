//! Management calls: addresses, queues and their counters, browsing, settings.
//!
//! These are plain request/response calls on the Admin service. The broker answers
//! NOT_FOUND for an unknown address or queue, ALREADY_EXISTS, INVALID_ARGUMENT for a
//! bad name and FAILED_PRECONDITION for a conflicting state; all arrive as
//! [`Error::Status`].

use crate::{Client, Error, Message, MessageState, QueueInfo, Result, RoutingType, ServerInfo, SettingValue, proto};

/// A message seen by [`Client::browse`], which consumes nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct BrowsedMessage {
    /// The message.
    pub message: Message,
    /// Deliveries so far; 0 if never delivered.
    pub delivery_count: u32,
    /// Ready, being delivered, or waiting for a delayed redelivery.
    pub state: MessageState,
    /// For [`MessageState::Scheduled`]: when it becomes deliverable, ms since the Unix epoch.
    pub scheduled_at_ms: u64,
}

impl TryFrom<proto::BrowsedMessage> for BrowsedMessage {
    type Error = Error;

    fn try_from(b: proto::BrowsedMessage) -> Result<Self> {
        Ok(BrowsedMessage {
            state: b.state(),
            message: b.message.ok_or_else(|| Error::missing("BrowsedMessage.message"))?,
            delivery_count: b.delivery_count,
            scheduled_at_ms: b.scheduled_at_ms,
        })
    }
}

impl Client {
    /// Creates an address. [`RoutingType::Unspecified`] means the address's
    /// `default-address-routing-type` setting.
    pub async fn create_address(&self, name: &str, routing_type: RoutingType) -> Result<()> {
        let request = proto::CreateAddressRequest {
            name: name.to_owned(),
            routing_type: routing_type.into(),
        };
        self.admin.clone().create_address(request).await?;
        Ok(())
    }

    /// Deletes an address. An address that still has queues is refused
    /// (FAILED_PRECONDITION) unless `force`, which deletes its queues and their
    /// messages too.
    pub async fn delete_address(&self, name: &str, force: bool) -> Result<()> {
        let request = proto::DeleteAddressRequest {
            name: name.to_owned(),
            force,
        };
        self.admin.clone().delete_address(request).await?;
        Ok(())
    }

    /// Creates `queue` bound to `address` (created if missing). A non-durable queue
    /// and its messages are lost on restart.
    pub async fn create_queue(
        &self,
        address: &str,
        queue: &str,
        routing_type: RoutingType,
        durable: bool,
    ) -> Result<QueueInfo> {
        let request = proto::CreateQueueRequest {
            address: address.to_owned(),
            queue: queue.to_owned(),
            routing_type: routing_type.into(),
            durable: Some(durable),
        };
        let response = self.admin.clone().create_queue(request).await?.into_inner();
        response
            .queue
            .ok_or_else(|| Error::missing("CreateQueueResponse.queue"))
    }

    /// Deletes a queue and its messages.
    pub async fn delete_queue(&self, queue: &str) -> Result<()> {
        let request = proto::DeleteQueueRequest {
            queue: queue.to_owned(),
        };
        self.admin.clone().delete_queue(request).await?;
        Ok(())
    }

    /// Every queue with its counters.
    pub async fn list_queues(&self) -> Result<Vec<QueueInfo>> {
        Ok(self
            .admin
            .clone()
            .list_queues(proto::ListQueuesRequest {})
            .await?
            .into_inner()
            .queues)
    }

    /// One queue with its counters.
    pub async fn queue(&self, name: &str) -> Result<QueueInfo> {
        let request = proto::GetQueueRequest { queue: name.to_owned() };
        let response = self.admin.clone().get_queue(request).await?.into_inner();
        response.queue.ok_or_else(|| Error::missing("GetQueueResponse.queue"))
    }

    /// Up to `limit` messages of a queue (0: the broker's default of 200) in queue
    /// order, without consuming them or touching their delivery counts.
    pub async fn browse(&self, queue: &str, limit: u32) -> Result<Vec<BrowsedMessage>> {
        let request = proto::BrowseQueueRequest {
            queue: queue.to_owned(),
            limit,
            ..Default::default()
        };
        let response = self.admin.clone().browse_queue(request).await?.into_inner();
        response.messages.into_iter().map(TryInto::try_into).collect()
    }

    /// Removes a queue's messages, except those being delivered; returns how many.
    pub async fn purge(&self, queue: &str) -> Result<u64> {
        let request = proto::PurgeQueueRequest {
            queue: queue.to_owned(),
        };
        Ok(self.admin.clone().purge_queue(request).await?.into_inner().removed)
    }

    /// The effective address-settings of `address`, each with where its value came from.
    pub async fn settings(&self, address: &str) -> Result<Vec<SettingValue>> {
        let request = proto::GetSettingsRequest {
            address: address.to_owned(),
        };
        Ok(self.admin.clone().get_settings(request).await?.into_inner().settings)
    }

    /// The broker's version, uptime, memory and storage counters.
    pub async fn server_info(&self) -> Result<ServerInfo> {
        Ok(self
            .admin
            .clone()
            .get_server_info(proto::GetServerInfoRequest {})
            .await?
            .into_inner())
    }
}
