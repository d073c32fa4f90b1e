//! How hard a streamed content's compressor works, piece by piece, from
//! how fast the peer takes the output (as zstd's `--adapt` does): when the
//! transport waits on the compressor, compressing harder only makes the
//! transfer slower, so the effort falls, down to the bytes as they are in
//! the encoding's framing; when the output waits on the transport (a slow
//! link, a slow peer), the compressor has time to spare, so the effort
//! rises, up to what the content is judged worth ([`Effort::judge`]).
//!
//! Decisions come from data only ([`Drain`]: the moment, and how long the
//! output has waited on the transport in all), never from a clock, so a
//! sequence of observations always gives the same efforts.

use std::time::{Duration, Instant};

use super::codec::Effort;

/// What the encoder of a streamed content is told before a piece of it:
/// how its output is draining.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drain {
    /// The moment of the piece.
    pub at: Instant,
    /// How long, in all since the connection began, output has waited on
    /// the transport: from a write the transport took only part of (its
    /// buffer was full) to the next write it took bytes of. The count
    /// only grows.
    pub waited: Duration,
}

/// The shortest stretch judged at once: shorter ones hold too few
/// pieces, and the moments the caller passes may be its turn's, not the
/// piece's own.
const WINDOW: Duration = Duration::from_millis(10);

/// The pace of one streamed content: the effort of its next piece, and
/// the stretch of observations since the effort was last judged.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pace {
    effort: Effort,
    /// The first observation of the stretch being judged; `None` before
    /// any.
    since: Option<Drain>,
}

impl Pace {
    /// A pace that starts with the least work: until the output is seen to
    /// wait, compressing could only slow the transfer.
    pub(super) fn new() -> Pace {
        Pace {
            effort: Effort::Store,
            since: None,
        }
    }

    /// The effort for the next piece, at most `ceiling`.
    pub(super) fn effort(&self, ceiling: Effort) -> Effort {
        self.effort.min(ceiling)
    }

    /// Takes an observation. Once a stretch of at least [`WINDOW`] has
    /// passed since the last judgement, judges it by the share of its time
    /// the output waited on the transport: half or more raises the effort
    /// a step (up to `ceiling`), under a quarter lowers it a step, and
    /// anything between keeps it, so that a transfer near the balance does
    /// not change compressor at every stretch.
    pub(super) fn observe(&mut self, drain: Drain, ceiling: Effort) {
        let Some(since) = self.since else {
            self.since = Some(drain);
            return;
        };
        let elapsed = drain.at.saturating_duration_since(since.at);
        if elapsed < WINDOW {
            return;
        }
        // The count only grows; a caller's fault must not raise the effort.
        let waited = drain.waited.saturating_sub(since.waited).min(elapsed);
        self.effort = if waited * 2 >= elapsed {
            self.effort.raised(ceiling)
        } else if waited * 4 < elapsed {
            self.effort.lowered()
        } else {
            self.effort.min(ceiling)
        };
        self.since = Some(drain);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Observations every `step`, the output waiting `waited_each` of each.
    fn run(
        pace: &mut Pace,
        start: &mut Drain,
        n: usize,
        step: Duration,
        waited_each: Duration,
        ceiling: Effort,
    ) -> Vec<Effort> {
        (0..n)
            .map(|_| {
                start.at += step;
                start.waited += waited_each;
                pace.observe(*start, ceiling);
                pace.effort(ceiling)
            })
            .collect()
    }

    fn origin() -> Drain {
        Drain {
            at: Instant::now(),
            waited: Duration::ZERO,
        }
    }

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_peer_that_takes_everything_gets_the_bytes_as_they_are() {
        let mut pace = Pace::new();
        let mut at = origin();
        pace.observe(at, Effort::Balanced);
        assert_eq!(pace.effort(Effort::Balanced), Effort::Store);
        let efforts = run(&mut pace, &mut at, 100, MS, Duration::ZERO, Effort::Balanced);
        assert!(efforts.iter().all(|&e| e == Effort::Store), "{efforts:?}");
    }

    #[test]
    fn output_that_backs_up_raises_the_effort_a_step_a_stretch_up_to_the_ceiling() {
        let mut pace = Pace::new();
        let mut at = origin();
        pace.observe(at, Effort::Balanced);
        // Nine tenths of every millisecond waiting on the transport.
        let efforts = run(&mut pace, &mut at, 35, MS, MS * 9 / 10, Effort::Balanced);
        assert_eq!(
            efforts[8],
            Effort::Store,
            "a stretch shorter than the window decides nothing"
        );
        assert_eq!(efforts[9], Effort::Fast);
        assert_eq!(efforts[19], Effort::Balanced);
        assert_eq!(efforts[34], Effort::Balanced);
        // Binary content is worth a fast level at most; random bytes none.
        let mut pace = Pace::new();
        let efforts = run(&mut pace, &mut origin(), 50, MS, MS, Effort::Fast);
        assert_eq!(efforts.last(), Some(&Effort::Fast));
        let mut pace = Pace::new();
        let efforts = run(&mut pace, &mut origin(), 50, MS, MS, Effort::Store);
        assert!(efforts.iter().all(|&e| e == Effort::Store));
    }

    #[test]
    fn when_the_transport_catches_up_the_effort_falls_back() {
        let mut pace = Pace::new();
        let mut at = origin();
        pace.observe(at, Effort::Balanced);
        run(&mut pace, &mut at, 40, MS, MS, Effort::Balanced);
        assert_eq!(pace.effort(Effort::Balanced), Effort::Balanced);
        // The output no longer waits: a step down each stretch.
        let efforts = run(&mut pace, &mut at, 30, MS, Duration::ZERO, Effort::Balanced);
        assert_eq!(efforts[9], Effort::Fast);
        assert_eq!(efforts[19], Effort::Store);
        assert_eq!(efforts[29], Effort::Store);
    }

    #[test]
    fn near_the_balance_the_effort_holds() {
        let mut pace = Pace::new();
        let mut at = origin();
        pace.observe(at, Effort::Balanced);
        run(&mut pace, &mut at, 10, MS, MS, Effort::Balanced);
        assert_eq!(pace.effort(Effort::Balanced), Effort::Fast);
        // A third of the time waiting: neither idle nor backed up.
        let efforts = run(&mut pace, &mut at, 100, MS * 3, MS, Effort::Balanced);
        assert!(efforts.iter().all(|&e| e == Effort::Fast), "{efforts:?}");
    }

    #[test]
    fn many_pieces_at_one_moment_decide_nothing() {
        // A caller that passes its turn's moment gives several pieces the
        // same one: no time passed, so nothing is known of the drain.
        let mut pace = Pace::new();
        let at = origin();
        pace.observe(at, Effort::Balanced);
        for i in 0..100 {
            let same = Drain {
                at: at.at,
                waited: MS * i,
            };
            pace.observe(same, Effort::Balanced);
        }
        assert_eq!(pace.effort(Effort::Balanced), Effort::Store);
        // A waited count that goes backwards is no wait.
        let mut pace = Pace::new();
        let mut at = origin();
        at.waited = Duration::from_secs(5);
        pace.observe(at, Effort::Balanced);
        at.waited = Duration::ZERO;
        let efforts = run(&mut pace, &mut at, 30, MS, Duration::ZERO, Effort::Balanced);
        assert!(efforts.iter().all(|&e| e == Effort::Store));
    }
}
