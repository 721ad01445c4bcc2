//! A range of one queue's records in id order, merged across runs.
//!
//! A queue's runs mostly hold disjoint id ranges (ids grow with time), but a
//! message written again, or carried over by compaction, sits in a newer run
//! than its neighbours: the runs are merged by id. A run joins the merge only
//! once the merge reaches its lowest id, so a scan at the head of a deep
//! queue reads one or two runs, not hundreds. Each run is read a block at a
//! time; the ids no longer live in it are dropped as its block is read.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;

use super::Runs;
use super::run::Run;
use crate::error::StorageError;
use crate::{MessageId, QueueId};

/// The iterator [`Runs::range`] returns.
pub(crate) struct Range<'a> {
    runs: &'a Runs,
    queue: QueueId,
    first: MessageId,
    last: MessageId,
    /// Runs not yet merged, by lowest id, highest first (taken from the end).
    waiting: Vec<(MessageId, u64, Arc<Run>)>,
    cursors: Vec<Cursor>,
    /// The next id of each cursor that has one.
    heap: BinaryHeap<Reverse<(MessageId, usize)>>,
    /// The last id returned: an id met again (a stale copy read before its
    /// newer run killed it) is skipped.
    returned: Option<MessageId>,
    failed: bool,
}

/// Where the merge is in one run.
struct Cursor {
    run: u64,
    file: Arc<Run>,
    /// The next block to read.
    block: usize,
    /// Live entries read but not returned yet.
    entries: VecDeque<(MessageId, Bytes)>,
    /// No block is left to read.
    done: bool,
}

impl<'a> Range<'a> {
    pub(super) fn new(runs: &'a Runs, queue: QueueId, first: MessageId, last: MessageId) -> Range<'a> {
        let mut waiting: Vec<(MessageId, u64, Arc<Run>)> = {
            let state = runs.read();
            state
                .queues
                .get(&queue)
                .into_iter()
                .flat_map(|q| &q.parts)
                .filter(|p| p.max >= first && p.min <= last)
                .map(|p| (p.min, p.run, Arc::clone(&state.runs[&p.run].file)))
                .collect()
        };
        waiting.sort_by_key(|(min, run, _)| Reverse((*min, *run)));
        Range {
            runs,
            queue,
            first,
            last,
            waiting,
            cursors: Vec::new(),
            heap: BinaryHeap::new(),
            returned: None,
            failed: false,
        }
    }

    /// Reads blocks of cursor `i` until it has a live entry or none is left.
    fn fill(&mut self, i: usize) -> Result<(), StorageError> {
        let (queue, first, last) = (self.queue, self.first, self.last);
        let cursor = &mut self.cursors[i];
        while cursor.entries.is_empty() && !cursor.done {
            if cursor.block >= cursor.file.block_count() {
                cursor.done = true;
                break;
            }
            let Some(entries) = self.runs.read_block(cursor.run, &cursor.file, cursor.block)? else {
                // Deleted meanwhile: nothing in it was live.
                cursor.done = true;
                break;
            };
            cursor.block += 1;
            if entries.last().is_none_or(|(key, _)| *key >= (queue, last)) {
                cursor.done = true;
            }
            let state = self.runs.read();
            let Some(part) = state
                .queues
                .get(&queue)
                .and_then(|q| q.parts.iter().find(|p| p.run == cursor.run))
            else {
                // Nothing of the queue is live in this run any more.
                cursor.done = true;
                break;
            };
            cursor.entries.extend(
                entries
                    .into_iter()
                    .filter(|((q, id), _)| {
                        *q == queue && (first..=last).contains(id) && part.live.contains(*id)
                    })
                    .map(|((_, id), value)| (id, value)),
            );
        }
        if let Some((id, _)) = cursor.entries.front() {
            self.heap.push(Reverse((*id, i)));
        }
        Ok(())
    }

    fn advance(&mut self) -> Result<Option<(MessageId, Bytes)>, StorageError> {
        loop {
            // Merge in every run that may hold the next id.
            while let Some((min, ..)) = self.waiting.last() {
                if self.heap.peek().is_some_and(|Reverse((next, _))| next < min) {
                    break;
                }
                let (_, run, file) = self.waiting.pop().expect("peeked");
                let block = file.block_of((self.queue, self.first));
                self.cursors.push(Cursor {
                    run,
                    file,
                    block,
                    entries: VecDeque::new(),
                    done: false,
                });
                self.fill(self.cursors.len() - 1)?;
            }
            let Some(Reverse((id, i))) = self.heap.pop() else {
                return Ok(None);
            };
            let (_, value) = self.cursors[i].entries.pop_front().expect("in the heap");
            match self.cursors[i].entries.front() {
                Some((next, _)) => self.heap.push(Reverse((*next, i))),
                None => self.fill(i)?,
            }
            if self.returned.is_some_and(|returned| id <= returned) {
                continue;
            }
            self.returned = Some(id);
            return Ok(Some((id, value)));
        }
    }
}

impl Iterator for Range<'_> {
    type Item = Result<(MessageId, Bytes), StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let next = self.advance();
        self.failed = next.is_err();
        next.transpose()
    }
}
