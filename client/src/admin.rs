//! Management calls: addresses, queues and their counters, browsing, settings, and
//! operations on selected messages (count, remove, move, retry dead letters).
//!
//! These are plain request/response calls on the Admin service. The broker answers
//! NOT_FOUND for an unknown address or queue, ALREADY_EXISTS, INVALID_ARGUMENT for a
//! bad name and FAILED_PRECONDITION for a conflicting state; all arrive as
//! [`Error::Status`].

use crate::{
    AddressInfo, Client, Error, Message, MessageState, QueueInfo, Result, RetryMessagesResponse, RoutingType,
    ServerInfo, SettingValue, proto,
};

/// A message seen by [`Client::browse`], which consumes nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct BrowsedMessage {
    /// The message.
    pub message: Message,
    /// Deliveries so far; 0 if never delivered.
    pub delivery_count: u32,
    /// Ready, being delivered, or waiting (a delayed redelivery, or a message sent for later).
    pub state: MessageState,
    /// For [`MessageState::Scheduled`]: when it becomes deliverable, ms since the Unix epoch.
    pub scheduled_at_ms: u64,
}

impl TryFrom<proto::BrowsedMessage> for BrowsedMessage {
    type Error = Error;

    fn try_from(b: proto::BrowsedMessage) -> Result<Self> {
        Ok(BrowsedMessage {
            state: b.state(),
            message: b
                .message
                .ok_or_else(|| Error::missing("BrowsedMessage.message"))?,
            delivery_count: b.delivery_count,
            scheduled_at_ms: b.scheduled_at_ms,
        })
    }
}

/// Which messages of a queue a management call ([`Client::count_messages`],
/// [`Client::remove_messages`], [`Client::move_messages`], [`Client::retry_messages`])
/// applies to. Messages being delivered to a consumer are never touched.
///
/// ```
/// use rebound_client::Selection;
/// let reds = Selection::new("orders").filter("color = 'red'");
/// let one = Selection::new("DLQ").message_id(42);
/// # let _ = (reds, one);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// The queue.
    pub queue: String,
    /// Only the messages this selector matches; `None`: every message.
    pub filter: Option<String>,
    /// Only this message, by its id on the queue.
    pub message_id: Option<u64>,
}

impl Selection {
    /// Every message of `queue`.
    pub fn new(queue: impl Into<String>) -> Self {
        Selection {
            queue: queue.into(),
            filter: None,
            message_id: None,
        }
    }

    /// Narrows the selection to the messages `selector` matches (JMS syntax).
    pub fn filter(mut self, selector: impl Into<String>) -> Self {
        self.filter = Some(selector.into());
        self
    }

    /// Narrows the selection to one message.
    pub fn message_id(mut self, id: u64) -> Self {
        self.message_id = Some(id);
        self
    }
}

impl From<&Selection> for proto::MessageSelection {
    fn from(s: &Selection) -> Self {
        proto::MessageSelection {
            queue: s.queue.clone(),
            filter: s.filter.clone().unwrap_or_default(),
            message_id: s.message_id,
        }
    }
}

impl Client {
    /// Creates an address; `false` if it existed already as asked (nothing changed).
    /// One that exists with another routing type is refused with ALREADY_EXISTS.
    /// [`RoutingType::Unspecified`] means the address's `default-address-routing-type`
    /// setting, or whatever an existing address has.
    pub async fn create_address(&self, name: &str, routing_type: RoutingType) -> Result<bool> {
        let request = proto::CreateAddressRequest {
            name: name.to_owned(),
            routing_type: routing_type.into(),
        };
        Ok(self
            .admin
            .clone()
            .create_address(request)
            .await?
            .into_inner()
            .created)
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

    /// Every queue with its counters, sorted by name. The broker answers a page at
    /// a time ([`list_queues_page`](Self::list_queues_page)); this follows the pages.
    pub async fn list_queues(&self) -> Result<Vec<QueueInfo>> {
        every_page(async |token| {
            let page = self.list_queues_page(0, token).await?;
            Ok((page.queues, page.next_page_token))
        })
        .await
    }

    /// One queue with its counters.
    pub async fn queue(&self, name: &str) -> Result<QueueInfo> {
        let request = proto::GetQueueRequest {
            queue: name.to_owned(),
        };
        let response = self.admin.clone().get_queue(request).await?.into_inner();
        response
            .queue
            .ok_or_else(|| Error::missing("GetQueueResponse.queue"))
    }

    /// Up to `limit` messages of a queue (0: the broker's default of 200) in queue
    /// order, without consuming them or touching their delivery counts.
    pub async fn browse(&self, queue: &str, limit: u32) -> Result<Vec<BrowsedMessage>> {
        self.browse_filtered(queue, "", limit).await
    }

    /// Like [`browse`](Self::browse), but only the messages `filter` matches (a
    /// selector; empty: every message). A malformed selector is refused with
    /// [`Code::InvalidArgument`](crate::Code::InvalidArgument), naming the column.
    pub async fn browse_filtered(
        &self,
        queue: &str,
        filter: &str,
        limit: u32,
    ) -> Result<Vec<BrowsedMessage>> {
        let request = proto::BrowseQueueRequest {
            queue: queue.to_owned(),
            limit,
            filter: filter.to_owned(),
        };
        let response = self.admin.clone().browse_queue(request).await?.into_inner();
        response.messages.into_iter().map(TryInto::try_into).collect()
    }

    /// How many messages of the selection the queue holds (not counting those
    /// being delivered).
    pub async fn count_messages(&self, selection: &Selection) -> Result<u64> {
        let request = proto::CountMessagesRequest {
            selection: Some(selection.into()),
        };
        Ok(self
            .admin
            .clone()
            .count_messages(request)
            .await?
            .into_inner()
            .count)
    }

    /// Removes the selected messages (counted as dropped); returns how many.
    pub async fn remove_messages(&self, selection: &Selection) -> Result<u64> {
        let request = proto::RemoveMessagesRequest {
            selection: Some(selection.into()),
        };
        Ok(self
            .admin
            .clone()
            .remove_messages(request)
            .await?
            .into_inner()
            .removed)
    }

    /// Moves the selected messages to `to_address`, routed like a send there, one
    /// atomic move per message; returns how many moved.
    pub async fn move_messages(&self, selection: &Selection, to_address: &str) -> Result<u64> {
        let request = proto::MoveMessagesRequest {
            selection: Some(selection.into()),
            to_address: to_address.to_owned(),
        };
        Ok(self
            .admin
            .clone()
            .move_messages(request)
            .await?
            .into_inner()
            .moved)
    }

    /// Sends the selected dead letters back to exactly the queue each failed on
    /// (`_AMQ_ORIG_QUEUE`), with a fresh delivery count and `_REBOUND_REDRIVE_COUNT`
    /// incremented. With `dry_run` nothing moves and the outcomes say where each
    /// would go; `rate_per_second` (0: unlimited) paces the moves. Messages that
    /// cannot go back stay, with the reason in their outcome's `skipped`.
    pub async fn retry_messages(
        &self,
        selection: &Selection,
        dry_run: bool,
        rate_per_second: u32,
    ) -> Result<RetryMessagesResponse> {
        self.retry(selection, dry_run, rate_per_second, None).await
    }

    /// Like [`retry_messages`](Self::retry_messages), but stops once `limit` messages
    /// moved (in a dry run: would move); 0 = no limit. Skipped messages do not count
    /// and are reported again by every call, so to retry a large queue in chunks,
    /// call again while `moved` equals `limit`.
    pub async fn retry_messages_up_to(
        &self,
        selection: &Selection,
        dry_run: bool,
        rate_per_second: u32,
        limit: u32,
    ) -> Result<RetryMessagesResponse> {
        self.retry(selection, dry_run, rate_per_second, Some(limit)).await
    }

    async fn retry(
        &self,
        selection: &Selection,
        dry_run: bool,
        rate_per_second: u32,
        limit: Option<u32>,
    ) -> Result<RetryMessagesResponse> {
        let request = proto::RetryMessagesRequest {
            selection: Some(selection.into()),
            dry_run,
            rate_per_second,
            limit,
        };
        Ok(self.admin.clone().retry_messages(request).await?.into_inner())
    }

    /// Removes a queue's messages, except those being delivered; returns how many.
    pub async fn purge(&self, queue: &str) -> Result<u64> {
        let request = proto::PurgeQueueRequest {
            queue: queue.to_owned(),
        };
        Ok(self
            .admin
            .clone()
            .purge_queue(request)
            .await?
            .into_inner()
            .removed)
    }

    /// The effective address-settings of `address`, each with where its value came from.
    pub async fn settings(&self, address: &str) -> Result<Vec<SettingValue>> {
        let request = proto::GetSettingsRequest {
            address: address.to_owned(),
        };
        Ok(self
            .admin
            .clone()
            .get_settings(request)
            .await?
            .into_inner()
            .settings)
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

    /// One page of queues, sorted by name: at most `page_size` (0: the broker's
    /// default, 1000, which is also the most it sends), starting after the page whose
    /// `next_page_token` is `page_token` (empty: the first page). The response's
    /// `next_page_token` is empty on the last page.
    pub async fn list_queues_page(
        &self,
        page_size: u32,
        page_token: &str,
    ) -> Result<proto::ListQueuesResponse> {
        let request = proto::ListQueuesRequest {
            page_size,
            page_token: page_token.to_owned(),
        };
        Ok(self.admin.clone().list_queues(request).await?.into_inner())
    }

    /// Every address with its queues' names and summed gauges, sorted by name;
    /// follows the pages of [`list_addresses_page`](Self::list_addresses_page).
    pub async fn list_addresses(&self) -> Result<Vec<AddressInfo>> {
        every_page(async |token| {
            let page = self.list_addresses_page(0, token).await?;
            Ok((page.addresses, page.next_page_token))
        })
        .await
    }

    /// One page of addresses, paged like [`list_queues_page`](Self::list_queues_page).
    pub async fn list_addresses_page(
        &self,
        page_size: u32,
        page_token: &str,
    ) -> Result<proto::ListAddressesResponse> {
        let request = proto::ListAddressesRequest {
            page_size,
            page_token: page_token.to_owned(),
        };
        Ok(self.admin.clone().list_addresses(request).await?.into_inner())
    }

    /// One address with its queues' names and summed gauges; NOT_FOUND if it does
    /// not exist.
    pub async fn address(&self, name: &str) -> Result<AddressInfo> {
        let request = proto::GetAddressRequest {
            name: name.to_owned(),
        };
        let response = self.admin.clone().get_address(request).await?.into_inner();
        response
            .address
            .ok_or_else(|| Error::missing("GetAddressResponse.address"))
    }
}

/// Every item of a paged listing: `page` fetches the page after a token (empty:
/// the first) and returns its items and the next token, empty after the last page.
async fn every_page<T>(mut page: impl AsyncFnMut(&str) -> Result<(Vec<T>, String)>) -> Result<Vec<T>> {
    let mut items = Vec::new();
    let mut token = String::new();
    loop {
        let (more, next) = page(&token).await?;
        items.extend(more);
        if next.is_empty() {
            return Ok(items);
        }
        token = next;
    }
}
