//! A worker's connection deadlines, shared by the mio and io_uring workers:
//! one ordered set of entries, each naming a connection's slot, from which
//! the worker learns the earliest deadline to wait for and which
//! connections are due.
//!
//! Nearly every request moves its connection's deadline later (the idle
//! timer starts again). Removing and inserting an entry each time costs
//! more than the rest of a worker's bookkeeping for the request, so a
//! deadline that moves later leaves the set alone: the entry already there
//! comes first, and when it does, it arms the later deadline instead of
//! giving the connection a turn. Only a deadline that moves earlier adds an
//! entry; the entries it replaced stay in the set until their time and are
//! passed over then.

use std::collections::BTreeSet;
use std::time::Instant;

/// One connection's deadline, as its worker's [`Deadlines`] keeps it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(in crate::io_adapters::server) struct Deadline {
    /// The deadline the connection's machine asks for.
    wanted: Option<Instant>,
    /// Its entry in the set, never later than `wanted`.
    armed: Option<Instant>,
}

/// The deadlines of one worker's connections.
#[derive(Debug, Default)]
pub(in crate::io_adapters::server) struct Deadlines {
    entries: BTreeSet<(Instant, usize)>,
}

impl Deadlines {
    /// Sets the deadline of the connection in `slot` (`None`: it waits for
    /// none).
    pub(in crate::io_adapters::server) fn set(
        &mut self,
        deadline: &mut Deadline,
        slot: usize,
        at: Option<Instant>,
    ) {
        deadline.wanted = at;
        if let Some(at) = at
            && deadline.armed.is_none_or(|armed| at < armed)
        {
            self.entries.insert((at, slot));
            deadline.armed = Some(at);
        }
    }

    /// The earliest entry: the worker waits no longer than this. It may
    /// come before any deadline is due (an entry a later deadline
    /// replaced), never after one.
    pub(in crate::io_adapters::server) fn first(&self) -> Option<Instant> {
        self.entries.first().map(|(at, _)| *at)
    }

    /// The next connection whose deadline has come by `now`, if any; its
    /// deadline is then cleared. `deadline_of` finds in `slots` the
    /// deadline of the connection in a slot, or `None` when the slot holds
    /// none.
    pub(in crate::io_adapters::server) fn next_due<S: ?Sized>(
        &mut self,
        now: Instant,
        slots: &mut S,
        deadline_of: impl Fn(&mut S, usize) -> Option<&mut Deadline>,
    ) -> Option<usize> {
        while let Some(&(at, slot)) = self.entries.first() {
            if at > now {
                return None;
            }
            self.entries.pop_first();
            let Some(deadline) = deadline_of(slots, slot) else {
                continue;
            };
            if deadline.armed != Some(at) {
                // An entry an earlier deadline replaced.
                continue;
            }
            deadline.armed = None;
            match deadline.wanted {
                Some(later) if later > now => {
                    self.entries.insert((later, slot));
                    deadline.armed = Some(later);
                }
                Some(_) => {
                    deadline.wanted = None;
                    return Some(slot);
                }
                None => {}
            }
        }
        None
    }

    /// The connection in `slot` is gone: its entry goes, so that the slot's
    /// next connection does not find it.
    pub(in crate::io_adapters::server) fn forget(&mut self, deadline: &mut Deadline, slot: usize) {
        if let Some(at) = deadline.armed.take() {
            self.entries.remove(&(at, slot));
        }
        deadline.wanted = None;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn due(deadlines: &mut Deadlines, slots: &mut [Deadline], now: Instant) -> Vec<usize> {
        let mut found = Vec::new();
        while let Some(slot) = deadlines.next_due(now, slots, |slots, slot| slots.get_mut(slot)) {
            found.push(slot);
        }
        found
    }

    #[test]
    fn a_deadline_moved_later_is_kept_without_a_new_entry_and_comes_at_its_own_time() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut deadlines = Deadlines::default();
        let mut slots = [Deadline::default(); 2];
        deadlines.set(&mut slots[0], 0, Some(at(5)));
        deadlines.set(&mut slots[0], 0, Some(at(10)));
        deadlines.set(&mut slots[0], 0, Some(at(15)));
        assert_eq!(deadlines.entries.len(), 1, "moving later adds nothing");
        assert_eq!(deadlines.first(), Some(at(5)));
        // The old entry comes, and arms the deadline asked for last.
        assert!(due(&mut deadlines, &mut slots, at(6)).is_empty());
        assert_eq!(deadlines.first(), Some(at(15)));
        assert!(due(&mut deadlines, &mut slots, at(14)).is_empty());
        assert_eq!(due(&mut deadlines, &mut slots, at(15)), [0]);
        assert_eq!(deadlines.first(), None);
        assert!(due(&mut deadlines, &mut slots, at(100)).is_empty());
    }

    #[test]
    fn a_deadline_moved_earlier_comes_then_and_the_replaced_entry_is_passed_over() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut deadlines = Deadlines::default();
        let mut slots = [Deadline::default(); 2];
        deadlines.set(&mut slots[1], 1, Some(at(10)));
        deadlines.set(&mut slots[1], 1, Some(at(3)));
        deadlines.set(&mut slots[0], 0, Some(at(7)));
        assert_eq!(deadlines.first(), Some(at(3)));
        assert_eq!(due(&mut deadlines, &mut slots, at(3)), [1]);
        assert_eq!(
            due(&mut deadlines, &mut slots, at(10)),
            [0],
            "slot 1's replaced entry is passed over"
        );
        assert_eq!(deadlines.first(), None);
    }

    #[test]
    fn no_deadline_and_a_forgotten_slot_give_no_turn() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut deadlines = Deadlines::default();
        let mut slots = [Deadline::default(); 2];
        deadlines.set(&mut slots[0], 0, Some(at(1)));
        deadlines.set(&mut slots[0], 0, None);
        deadlines.set(&mut slots[1], 1, Some(at(2)));
        deadlines.forget(&mut slots[1], 1);
        assert_eq!(deadlines.first(), Some(at(1)));
        assert!(due(&mut deadlines, &mut slots, at(5)).is_empty());
        assert_eq!(deadlines.first(), None);
        // A slot whose connection is gone is passed over too.
        deadlines.set(&mut slots[0], 0, Some(at(6)));
        let next = deadlines.next_due(at(7), &mut slots, |_, _| None);
        assert_eq!(next, None);
        assert_eq!(deadlines.first(), None);
    }

    /// What a worker does to its deadlines: sets a connection's (seconds
    /// from now, or none), forgets a connection, or lets time pass and
    /// gives the due connections their turns.
    #[derive(Debug, Clone)]
    enum Move {
        Set(usize, Option<u64>),
        Forget(usize),
        Pass(u64),
    }

    fn moves() -> impl proptest::strategy::Strategy<Value = Vec<Move>> {
        use proptest::prelude::*;
        let slot = 0..4usize;
        proptest::collection::vec(
            prop_oneof![
                4 => (slot.clone(), proptest::option::weighted(0.8, 0..20u64)).prop_map(|(s, at)| Move::Set(s, at)),
                1 => slot.prop_map(Move::Forget),
                3 => (0..8u64).prop_map(Move::Pass),
            ],
            1..60,
        )
    }

    proptest::proptest! {
        /// Against the plain account (each connection's deadline, or
        /// none): a connection gets its turn once its deadline has come,
        /// and only then, once; the worker never waits past a deadline;
        /// and a connection with none, or forgotten, gets no turn.
        #[test]
        fn every_deadline_comes_once_at_its_time_whatever_the_moves(moves in moves()) {
            let t0 = Instant::now();
            let at = |s: u64| t0 + Duration::from_secs(s);
            let mut deadlines = Deadlines::default();
            let mut slots = [Deadline::default(); 4];
            let mut wanted: [Option<Instant>; 4] = [None; 4];
            let mut now = 0;
            for step in moves {
                match step {
                    Move::Set(slot, after) => {
                        let when = after.map(|s| at(now + s));
                        deadlines.set(&mut slots[slot], slot, when);
                        wanted[slot] = when;
                    }
                    Move::Forget(slot) => {
                        deadlines.forget(&mut slots[slot], slot);
                        wanted[slot] = None;
                    }
                    Move::Pass(seconds) => {
                        now += seconds;
                        let mut turns = due(&mut deadlines, &mut slots, at(now));
                        turns.sort_unstable();
                        let mut expected: Vec<usize> =
                            (0..4).filter(|&s| wanted[s].is_some_and(|w| w <= at(now))).collect();
                        expected.sort_unstable();
                        proptest::prop_assert_eq!(&turns, &expected, "the due connections, each once, at {}", now);
                        for slot in turns {
                            wanted[slot] = None;
                        }
                    }
                }
                let earliest = wanted.iter().flatten().min().copied();
                if let Some(earliest) = earliest {
                    let first = deadlines.first();
                    proptest::prop_assert!(
                        first.is_some_and(|first| first <= earliest),
                        "the worker waits until {first:?}, past a deadline at {earliest:?}"
                    );
                }
            }
        }
    }
}
