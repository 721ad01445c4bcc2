//! Step redelivery schedules (`redelivery-schedule`).
//!
//! Artemis only knows a geometric redelivery delay. Some users want "retry
//! quickly a few times, then slowly, then give up into a parking queue",
//! which the JMS binding component of other brokers expresses as a compact
//! string, e.g. `5:1000; 10:5000; 50:move(queue:dlq$oops)`. We accept the
//! same format:
//!
//! ```text
//! schedule := entry (";" entry)*
//! entry    := index ":" action           index: the n-th delivery, >= 1
//! action   := delay-ms | "delete" | "move(" kind ":" name ")"
//! kind     := "queue" | "topic" | "same"
//! ```
//!
//! Indices must strictly increase and a terminal step (`delete`, `move`) must
//! be the last. The step with the greatest index not above the delivery
//! number applies: a delay is waited *before* that delivery, a terminal
//! action happens *instead of* it. In the example above, deliveries 1–4 are
//! immediate, 5–9 wait 1 s, 10–49 wait 5 s, and instead of the 50th the
//! message is moved to the anycast address `dlq<original address>oops`.
//!
//! A move target must make a valid address name: it is checked with `$`
//! replaced by a one-letter word, so whitespace in the literal part, or a
//! literal part already too long, is refused here rather than every moved
//! message being dropped later.

use std::fmt;
use std::str::FromStr;

use crate::names::{PLACEHOLDER, name_problem};
use crate::routing_type::RoutingType;

/// A parsed, validated step redelivery schedule; never empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedeliverySchedule {
    steps: Vec<Step>,
}

/// One `index:action` entry of a schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The delivery number (1 = first delivery) from which the action applies.
    pub index: u32,
    /// What to do from that delivery on.
    pub action: StepAction,
}

/// What happens to a message about to be delivered for the n-th time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepAction {
    /// Wait this many milliseconds before delivering.
    Delay(u64),
    /// Drop the message instead of delivering it.
    Delete,
    /// Move the message elsewhere instead of delivering it.
    Move(MoveTarget),
}

/// Where a `move(kind:name)` step sends the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveTarget {
    /// Which routing type the target address gets.
    pub kind: MoveKind,
    /// Target address; each `$` stands for the original address.
    pub name: String,
}

/// The `kind` of a move target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoveKind {
    /// An anycast address.
    Queue,
    /// A multicast address.
    Topic,
    /// The routing type of the address the message came from.
    Same,
}

/// Why a schedule string was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// Nothing but whitespace.
    #[error("the schedule is empty")]
    Empty,
    /// The entry at `position` (1-based) is wrong.
    #[error("entry {position} `{entry}`: {problem}")]
    Entry {
        /// 1-based position of the entry in the schedule.
        position: usize,
        /// The entry's text, trimmed.
        entry: String,
        /// What is wrong with it.
        problem: EntryProblem,
    },
}

/// What is wrong with one schedule entry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EntryProblem {
    /// No `:` between index and action (an empty entry also lands here).
    #[error("expected `index:action`")]
    MissingColon,
    /// The index is not a positive integer.
    #[error("the index must be a positive integer")]
    BadIndex,
    /// The action is none of the known forms.
    #[error("the action must be a delay in ms, `delete` or `move(kind:name)`")]
    BadAction,
    /// `move(...)` with a kind other than queue, topic or same.
    #[error("the move kind must be `queue`, `topic` or `same`")]
    BadMoveKind,
    /// `move(kind:)`.
    #[error("the move target name is empty")]
    EmptyName,
    /// The target can never be a valid address name, whatever `$` stands for
    /// (see `names.rs`): the message would be dropped instead of moved.
    #[error("the move target `{0}` {1}")]
    BadName(String, String),
    /// The index does not exceed the previous entry's index.
    #[error("the index must be greater than the previous index {0}")]
    NotIncreasing(u32),
    /// An entry after `delete` or `move(...)`.
    #[error("nothing may follow the terminal step at index {0}")]
    AfterTerminal(u32),
}

impl RedeliverySchedule {
    /// Parses a schedule string; whitespace around tokens is ignored.
    pub fn parse(text: &str) -> Result<Self, ScheduleError> {
        if text.trim().is_empty() {
            return Err(ScheduleError::Empty);
        }
        let mut steps: Vec<Step> = Vec::new();
        for (i, raw) in text.split(';').enumerate() {
            let entry = raw.trim();
            let fail = |problem| ScheduleError::Entry {
                position: i + 1,
                entry: entry.to_owned(),
                problem,
            };
            let step = parse_step(entry).map_err(fail)?;
            if let Some(previous) = steps.last() {
                if previous.action.is_terminal() {
                    return Err(fail(EntryProblem::AfterTerminal(previous.index)));
                }
                if step.index <= previous.index {
                    return Err(fail(EntryProblem::NotIncreasing(previous.index)));
                }
            }
            steps.push(step);
        }
        Ok(RedeliverySchedule { steps })
    }

    /// The action for the `delivery_number`-th delivery (1 = first): the
    /// step with the greatest index not above it, or `None` before the
    /// first step (deliver without delay).
    pub fn step_for(&self, delivery_number: u32) -> Option<&StepAction> {
        let after = self.steps.partition_point(|step| step.index <= delivery_number);
        after.checked_sub(1).map(|i| &self.steps[i].action)
    }

    /// The steps, in increasing index order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }
}

fn parse_step(entry: &str) -> Result<Step, EntryProblem> {
    let (index, action) = entry.split_once(':').ok_or(EntryProblem::MissingColon)?;
    let index = parse_digits(index.trim()).ok_or(EntryProblem::BadIndex)?;
    let index = u32::try_from(index)
        .ok()
        .filter(|&i| i > 0)
        .ok_or(EntryProblem::BadIndex)?;
    Ok(Step {
        index,
        action: parse_action(action.trim())?,
    })
}

fn parse_action(action: &str) -> Result<StepAction, EntryProblem> {
    if action == "delete" {
        return Ok(StepAction::Delete);
    }
    if let Some(delay) = parse_digits(action) {
        return Ok(StepAction::Delay(delay));
    }
    let args = action
        .strip_prefix("move")
        .and_then(|rest| rest.trim_start().strip_prefix('('))
        .and_then(|rest| rest.strip_suffix(')'))
        .ok_or(EntryProblem::BadAction)?;
    let (kind, name) = args.split_once(':').ok_or(EntryProblem::BadMoveKind)?;
    let kind = match kind.trim() {
        "queue" => MoveKind::Queue,
        "topic" => MoveKind::Topic,
        "same" => MoveKind::Same,
        _ => return Err(EntryProblem::BadMoveKind),
    };
    let name = name.trim();
    if name.is_empty() {
        return Err(EntryProblem::EmptyName);
    }
    if let Some(problem) = name_problem(&name.replace('$', PLACEHOLDER)) {
        return Err(EntryProblem::BadName(name.to_owned(), problem));
    }
    Ok(StepAction::Move(MoveTarget {
        kind,
        name: name.to_owned(),
    }))
}

/// Plain decimal digits only: `u64::from_str` would also accept `+5`.
fn parse_digits(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

impl StepAction {
    /// Whether the message is gone from the queue after this step.
    pub fn is_terminal(&self) -> bool {
        !matches!(self, StepAction::Delay(_))
    }
}

impl MoveTarget {
    /// The target address for a message from `original_address`.
    pub fn address_for(&self, original_address: &str) -> String {
        self.name.replace('$', original_address)
    }
}

impl MoveKind {
    /// The routing type of the target address, given the routing type of the
    /// address the message came from.
    pub fn routing_type(self, original: RoutingType) -> RoutingType {
        match self {
            MoveKind::Queue => RoutingType::Anycast,
            MoveKind::Topic => RoutingType::Multicast,
            MoveKind::Same => original,
        }
    }

    /// The keyword used in the schedule syntax.
    pub fn as_str(self) -> &'static str {
        match self {
            MoveKind::Queue => "queue",
            MoveKind::Topic => "topic",
            MoveKind::Same => "same",
        }
    }
}

impl FromStr for RedeliverySchedule {
    type Err = ScheduleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RedeliverySchedule::parse(s)
    }
}

/// Renders the canonical form, e.g. `5:1000; 50:move(queue:dlq$)`, which
/// parses back to the same schedule.
impl fmt::Display for RedeliverySchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, step) in self.steps.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{}:{}", step.index, step.action)?;
        }
        Ok(())
    }
}

impl fmt::Display for StepAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepAction::Delay(ms) => write!(f, "{ms}"),
            StepAction::Delete => f.write_str("delete"),
            StepAction::Move(target) => write!(f, "move({}:{})", target.kind.as_str(), target.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn schedule(text: &str) -> RedeliverySchedule {
        RedeliverySchedule::parse(text).unwrap()
    }

    fn problem(text: &str) -> (usize, EntryProblem) {
        match RedeliverySchedule::parse(text).unwrap_err() {
            ScheduleError::Entry {
                position, problem, ..
            } => (position, problem),
            ScheduleError::Empty => panic!("unexpected Empty for {text:?}"),
        }
    }

    fn to_queue(name: &str) -> StepAction {
        StepAction::Move(MoveTarget {
            kind: MoveKind::Queue,
            name: name.into(),
        })
    }

    #[test]
    fn example_1_delays_only() {
        let s = schedule("5:1000; 10:5000");
        let expected: &[(u32, Option<StepAction>)] = &[
            (1, None),
            (4, None),
            (5, Some(StepAction::Delay(1000))),
            (9, Some(StepAction::Delay(1000))),
            (10, Some(StepAction::Delay(5000))),
            (11, Some(StepAction::Delay(5000))),
            (u32::MAX, Some(StepAction::Delay(5000))),
        ];
        for (n, action) in expected {
            assert_eq!(s.step_for(*n), action.as_ref(), "delivery {n}");
        }
    }

    #[test]
    fn example_2_move_to_queue() {
        let s = schedule("5:1000; 10:5000; 50:move(queue:mydlq)");
        assert_eq!(s.step_for(0), None);
        assert_eq!(s.step_for(9), Some(&StepAction::Delay(1000)));
        assert_eq!(s.step_for(49), Some(&StepAction::Delay(5000)));
        assert_eq!(s.step_for(50), Some(&to_queue("mydlq")));
        assert_eq!(s.step_for(51), Some(&to_queue("mydlq")));
    }

    #[test]
    fn example_3_dollar_is_the_original_address() {
        let s = schedule("5:1000; 10:5000; 50:move(queue:dlq$oops)");
        let Some(StepAction::Move(target)) = s.step_for(50) else {
            panic!()
        };
        assert_eq!(target.address_for("Queue1"), "dlqQueue1oops");
        assert_eq!(
            target.kind.routing_type(RoutingType::Multicast),
            RoutingType::Anycast
        );
    }

    #[test]
    fn move_kinds_and_whitespace() {
        let s = schedule("  1 : 0 ;2:delete ");
        assert_eq!(s.steps().len(), 2);
        assert_eq!(s.step_for(2), Some(&StepAction::Delete));
        let topic = schedule("3: move ( topic : $.parked )");
        let Some(StepAction::Move(target)) = topic.step_for(3) else {
            panic!()
        };
        assert_eq!(target.kind, MoveKind::Topic);
        assert_eq!(target.address_for("a.b"), "a.b.parked");
        let same = schedule("7:move(same:$)");
        let Some(StepAction::Move(target)) = same.step_for(7) else {
            panic!()
        };
        assert_eq!(
            target.kind.routing_type(RoutingType::Multicast),
            RoutingType::Multicast
        );
        assert_eq!(same.to_string(), "7:move(same:$)");
    }

    #[test]
    fn malformed_inputs_name_the_entry() {
        use EntryProblem::*;
        assert_eq!(RedeliverySchedule::parse(""), Err(ScheduleError::Empty));
        assert_eq!(RedeliverySchedule::parse("  "), Err(ScheduleError::Empty));
        assert_eq!(problem("5:"), (1, BadAction));
        assert_eq!(problem("x:100"), (1, BadIndex));
        assert_eq!(problem("0:100"), (1, BadIndex));
        assert_eq!(problem("+5:100"), (1, BadIndex));
        assert_eq!(problem("5:-100"), (1, BadAction));
        assert_eq!(problem("5:move(bogus:x)"), (1, BadMoveKind));
        assert_eq!(problem("5:move(queue)"), (1, BadMoveKind));
        assert_eq!(problem("5:move(queue:)"), (1, EmptyName));
        assert_eq!(problem("5:move(queue:x"), (1, BadAction));
        let must_not = "must not contain whitespace or control characters";
        assert_eq!(
            problem("2:move(queue:bad name$)"),
            (1, BadName("bad name$".into(), must_not.into()))
        );
        let long = format!("{}$", "a".repeat(255));
        assert_eq!(
            problem(&format!("2:move(topic:{long})")),
            (1, BadName(long, "must be at most 255 bytes".into()))
        );
        assert_eq!(
            schedule(&format!("2:move(same:{}$)", "a".repeat(254)))
                .steps()
                .len(),
            1
        );
        assert_eq!(problem("5:kill"), (1, BadAction));
        assert_eq!(problem("10:100; 5:200"), (2, NotIncreasing(10)));
        assert_eq!(problem("5:100; 5:200"), (2, NotIncreasing(5)));
        assert_eq!(problem("5:delete; 9:100"), (2, AfterTerminal(5)));
        assert_eq!(problem("1:1; 5:move(queue:x); 9:delete"), (3, AfterTerminal(5)));
        assert_eq!(problem("5:100;"), (2, MissingColon));
        assert_eq!(problem("5:100;; 6:1"), (2, MissingColon));
        assert_eq!(problem("99999999999:1"), (1, BadIndex));
        let err = RedeliverySchedule::parse("5:100; 7:soon").unwrap_err();
        assert_eq!(
            err.to_string(),
            "entry 2 `7:soon`: the action must be a delay in ms, `delete` or `move(kind:name)`"
        );
    }

    fn action() -> impl Strategy<Value = StepAction> {
        let kind = prop::sample::select(vec![MoveKind::Queue, MoveKind::Topic, MoveKind::Same]);
        prop_oneof![
            any::<u64>().prop_map(StepAction::Delay),
            Just(StepAction::Delete),
            (kind, "[A-Za-z0-9._$:()-]{1,12}")
                .prop_map(|(kind, name)| StepAction::Move(MoveTarget { kind, name })),
        ]
    }

    fn any_schedule() -> impl Strategy<Value = RedeliverySchedule> {
        (
            prop::collection::vec((1u32..1000, any::<u64>()), 0..6),
            prop::option::of((1u32..1000, action())),
        )
            .prop_map(|(delays, last)| {
                let mut index = 0;
                let mut steps: Vec<Step> = delays
                    .into_iter()
                    .map(|(gap, ms)| {
                        index += gap;
                        Step {
                            index,
                            action: StepAction::Delay(ms),
                        }
                    })
                    .collect();
                if let Some((gap, action)) = last {
                    steps.push(Step {
                        index: index + gap,
                        action,
                    });
                }
                steps
            })
            .prop_filter("empty", |steps| !steps.is_empty())
            .prop_map(|steps| RedeliverySchedule { steps })
    }

    proptest! {
        #[test]
        fn display_round_trips(s in any_schedule()) {
            prop_assert_eq!(RedeliverySchedule::parse(&s.to_string()), Ok(s));
        }

        #[test]
        fn arbitrary_text_parses_or_is_an_error_never_a_panic(text in any::<String>(), soup in "[0-9:;( )a-z$.-]{0,40}") {
            let _ = RedeliverySchedule::parse(&text);
            if let Ok(s) = RedeliverySchedule::parse(&soup) {
                prop_assert_eq!(RedeliverySchedule::parse(&s.to_string()), Ok(s));
            }
        }

        #[test]
        fn step_for_picks_the_greatest_index_not_above(s in any_schedule(), n in 0u32..7000) {
            let expected = s.steps().iter().rev().find(|step| step.index <= n).map(|step| &step.action);
            prop_assert_eq!(s.step_for(n), expected);
        }
    }
}
