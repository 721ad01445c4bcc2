//! The duplicate-id caches of addresses: written, recovered in order, removed.

use bytes::Bytes;
use rebound_storage::{AddressRecord, Op, Store};

use super::{Harness, ids, put, queue};

fn put_duplicate_id(address: &str, seq: u64, id: &str) -> Op {
    Op::PutDuplicateId {
        address: address.into(),
        seq,
        id: Bytes::copy_from_slice(id.as_bytes()),
    }
}

/// The entries of every address's duplicate-id cache, as `recover` lists them.
fn duplicate_ids(store: &dyn Store) -> Vec<(String, u64, Bytes)> {
    store
        .recover()
        .unwrap()
        .duplicate_ids
        .into_iter()
        .map(|d| (d.address, d.seq, d.id))
        .collect()
}

/// Duplicate-id cache entries are written with the message they came with,
/// survive a restart, come back one address at a time ascending by seq,
/// leave one by one (the FIFO dropping the oldest) or all together with their
/// address, and touch no other address's entries.
pub async fn duplicate_ids_are_kept_in_order_removed_and_deleted_with_their_address(h: &mut dyn Harness) {
    let store = h.open();
    let orders = AddressRecord {
        name: "orders".into(),
        anycast: true,
        ..Default::default()
    };
    store
        .commit(vec![
            Op::PutAddress(orders),
            Op::PutQueue(queue(1, "q")),
            put(1, 1),
            put_duplicate_id("orders", 2, "b"),
            put_duplicate_id("orders", 1, "a"),
            put_duplicate_id("orders.eu", 1, "a"),
            put_duplicate_id("o", 300, "x"),
        ])
        .await
        .unwrap();
    store
        .commit(vec![
            Op::RemoveDuplicateId {
                address: "orders".into(),
                seq: 1,
                id: Bytes::from_static(b"a"),
            },
            put_duplicate_id("orders", 3, "c"),
            // Removing what is not there is no error.
            Op::RemoveDuplicateId {
                address: "nowhere".into(),
                seq: 1,
                id: Bytes::from_static(b"x"),
            },
        ])
        .await
        .unwrap();
    let store = h.reopen(store);
    let mut found = duplicate_ids(&*store);
    // One address after the other, each ascending by seq.
    let mut seen: Vec<&str> = Vec::new();
    for window in found.windows(2) {
        if window[0].0 == window[1].0 {
            assert!(window[0].1 < window[1].1, "{found:?}");
        }
    }
    for (address, _, _) in &found {
        if seen.last() != Some(&address.as_str()) {
            assert!(
                !seen.contains(&address.as_str()),
                "{address} twice apart: {found:?}"
            );
            seen.push(address);
        }
    }
    found.sort();
    let entry = |a: &str, seq, id: &str| (a.to_owned(), seq, Bytes::copy_from_slice(id.as_bytes()));
    assert_eq!(
        found,
        [
            entry("o", 300, "x"),
            entry("orders", 2, "b"),
            entry("orders", 3, "c"),
            entry("orders.eu", 1, "a"),
        ]
    );
    // Deleting an address deletes its cache, also when the address has no record.
    store
        .commit(vec![
            Op::DeleteAddress("orders".into()),
            Op::DeleteAddress("o".into()),
        ])
        .await
        .unwrap();
    let store = h.reopen(store);
    assert_eq!(duplicate_ids(&*store), [entry("orders.eu", 1, "a")]);
    assert_eq!(ids(&*store, 1), [1]);
}
