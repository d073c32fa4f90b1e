//! How hard a streamed content's compressor works, piece by piece, from
//! how fast the peer takes the output (as zstd's `--adapt` does): when the
//! transport waits on the compressor, compressing harder only makes the
//! transfer slower, so the effort falls, down to the bytes as they are in
//! the encoding's framing; when the output waits on the transport (a slow
//! link, a slow peer), the compressor has time to spare, so the effort
//! rises, up to what the content is judged worth ([`Effort::judge`]).
//!
//! Decisions come from data only ([`Drain`]: the moment of each piece,
//! and how much output was still queued then), never from a clock, so a
//! sequence of observations always gives the same efforts.

use std::time::{Duration, Instant};

use super::codec::Effort;

/// What the encoder of a streamed content is told before a piece of it:
/// how its output is draining.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drain {
    /// The moment of the piece. Pieces given at one moment (a caller's
    /// turn) count as one observation: the first of them.
    pub at: Instant,
    /// Bytes of output queued and not yet taken by the transport. Output
    /// still queued when the next piece is due means the transport's
    /// buffer was full: from that moment to the next one, output waited
    /// on the transport.
    pub pending: usize,
}

/// The shortest stretch judged at once: shorter ones hold too few
/// pieces, and the moments the caller passes may be its turn's, not the
/// piece's own.
const WINDOW: Duration = Duration::from_millis(10);

/// The longest stretch without a judgement. A stretch is judged when a
/// wait ends, so that it holds whole cycles of a slow link (a burst the
/// transport's buffer takes at once, then a wait for it to drain); a
/// transport that never makes the output wait is judged this often.
const LONG_WINDOW: Duration = Duration::from_millis(100);

/// Output taken faster than this (bytes a second, about 800 Mbit/s) is
/// never made to wait for more compression, however often the transport's
/// buffer is full: a peer on loopback that falls behind for a moment (a
/// busy machine) would gain nothing, and a link this fast rarely repays
/// compressing harder than the bytes as they are.
const RAISE_BELOW: u128 = 100_000_000;

/// The pace of one streamed content: the effort of its next piece, and
/// the stretch of observations since the effort was last judged.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pace {
    effort: Effort,
    /// When the stretch being judged began.
    since: Instant,
    /// How long output waited on the transport in the stretch, up to
    /// `last`.
    waited: Duration,
    /// The moment of the last observation.
    last: Instant,
    /// Whether output was still queued at `last`: the time from it to the
    /// next observation was spent waiting on the transport.
    backed_up: bool,
    /// Output queued at `last`, with what the encoder made since.
    owed: u64,
    /// Output the transport took in the stretch, up to `last`.
    taken: u64,
}

impl Pace {
    /// A pace that starts, at the first observation, with the least work:
    /// until the output is seen to wait, compressing could only slow the
    /// transfer.
    pub(super) fn new(first: Drain) -> Pace {
        Pace {
            effort: Effort::Store,
            since: first.at,
            waited: Duration::ZERO,
            last: first.at,
            backed_up: first.pending > 0,
            owed: first.pending as u64,
            taken: 0,
        }
    }

    /// The encoder queued `n` more bytes of output.
    pub(super) fn produced(&mut self, n: usize) {
        self.owed += n as u64;
    }

    /// The effort for the next piece, at most `ceiling`.
    pub(super) fn effort(&self, ceiling: Effort) -> Effort {
        self.effort.min(ceiling)
    }

    /// Takes an observation. When a wait on the transport ends at least
    /// [`WINDOW`] after the last judgement, or [`LONG_WINDOW`] has passed
    /// without one, judges the stretch since by the share of its time the
    /// output waited on the transport: half or more raises the effort
    /// a step (up to `ceiling`), under an eighth lowers it a step, and
    /// anything between keeps it, so that a transfer near the balance does
    /// not change compressor at every stretch. The band is wide below: a
    /// compressor that only just keeps a slow link busy sends far fewer
    /// bytes than the step below would, so it falls back only when the
    /// transport clearly waits on it.
    pub(super) fn observe(&mut self, drain: Drain, ceiling: Effort) {
        if drain.at <= self.last {
            // The same moment (or a caller's clock gone back): no time
            // passed, so nothing is known of the drain.
            return;
        }
        let wait_ended = self.backed_up && drain.pending == 0;
        if self.backed_up {
            self.waited += drain.at - self.last;
        }
        self.last = drain.at;
        self.backed_up = drain.pending > 0;
        self.taken += self.owed.saturating_sub(drain.pending as u64);
        self.owed = drain.pending as u64;
        let elapsed = drain.at - self.since;
        if !(wait_ended && elapsed >= WINDOW || elapsed >= LONG_WINDOW) {
            return;
        }
        let slow = u128::from(self.taken) * 1_000_000_000 < RAISE_BELOW * elapsed.as_nanos();
        self.effort = if self.waited * 2 >= elapsed && slow {
            self.effort.raised(ceiling)
        } else if self.waited * 8 < elapsed {
            self.effort.lowered()
        } else {
            self.effort.min(ceiling)
        };
        self.since = drain.at;
        self.waited = Duration::ZERO;
        self.taken = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Observations every millisecond from `pace`'s last, each with
    /// output still queued or not as `backed_up` says; the efforts after
    /// each.
    fn run(pace: &mut Pace, n: usize, backed_up: impl Fn(usize) -> bool, ceiling: Effort) -> Vec<Effort> {
        let mut at = pace.last;
        (0..n)
            .map(|i| {
                at += MS;
                let pending = if backed_up(i) { 40_000 } else { 0 };
                pace.observe(Drain { at, pending }, ceiling);
                pace.effort(ceiling)
            })
            .collect()
    }

    fn start() -> Pace {
        Pace::new(Drain {
            at: crate::test_origin::origin(),
            pending: 0,
        })
    }

    #[test]
    fn a_peer_that_takes_everything_gets_the_bytes_as_they_are() {
        let mut pace = start();
        assert_eq!(pace.effort(Effort::Balanced), Effort::Store);
        let efforts = run(&mut pace, 100, |_| false, Effort::Balanced);
        assert!(efforts.iter().all(|&e| e == Effort::Store), "{efforts:?}");
    }

    #[test]
    fn output_that_backs_up_raises_the_effort_a_step_a_stretch_up_to_the_ceiling() {
        // Three milliseconds of four waiting, the wait ending each fourth.
        let backed_up = |i: usize| i % 4 != 3;
        let mut pace = start();
        let efforts = run(&mut pace, 35, backed_up, Effort::Balanced);
        assert_eq!(
            efforts[6],
            Effort::Store,
            "a stretch shorter than the window decides nothing"
        );
        assert_eq!(efforts[11], Effort::Fast);
        assert_eq!(efforts[23], Effort::Balanced);
        assert_eq!(efforts[34], Effort::Balanced);
        // A wait that never ends is judged at the longest stretch.
        let efforts = run(&mut start(), 200, |_| true, Effort::Balanced);
        assert_eq!(efforts[98], Effort::Store);
        assert_eq!(efforts[99], Effort::Fast);
        assert_eq!(efforts[199], Effort::Balanced);
        // Binary content is worth a fast level at most; random bytes none.
        let efforts = run(&mut start(), 50, backed_up, Effort::Fast);
        assert_eq!(efforts.last(), Some(&Effort::Fast));
        let efforts = run(&mut start(), 50, backed_up, Effort::Store);
        assert!(efforts.iter().all(|&e| e == Effort::Store));
    }

    #[test]
    fn when_the_transport_catches_up_the_effort_falls_back() {
        let mut pace = start();
        run(&mut pace, 40, |i| i % 4 != 3, Effort::Balanced);
        assert_eq!(pace.effort(Effort::Balanced), Effort::Balanced);
        // The output no longer waits: a step down each longest stretch.
        let efforts = run(&mut pace, 300, |_| false, Effort::Balanced);
        // (The last judgement was at 36 ms, this run starts at 41.)
        assert_eq!(efforts[94], Effort::Balanced);
        assert_eq!(efforts[95], Effort::Fast);
        assert_eq!(efforts[195], Effort::Store);
        assert_eq!(efforts[299], Effort::Store);
    }

    #[test]
    fn near_the_balance_the_effort_holds() {
        let mut pace = start();
        run(&mut pace, 12, |i| i % 4 != 3, Effort::Balanced);
        assert_eq!(pace.effort(Effort::Balanced), Effort::Fast);
        // A third of the time waiting: neither idle nor backed up.
        let efforts = run(&mut pace, 300, |i| i % 3 == 0, Effort::Balanced);
        assert!(efforts.iter().all(|&e| e == Effort::Fast), "{efforts:?}");
    }

    #[test]
    fn a_long_wait_between_bursts_is_a_slow_link() {
        // A slow link seen from a caller whose socket buffer is large:
        // bursts of pieces the transport takes at once, then a long wait
        // after a write it took only part of.
        let mut pace = start();
        let mut at = pace.last;
        for _ in 0..3 {
            for _ in 0..5 {
                at += MS / 10;
                pace.observe(Drain { at, pending: 0 }, Effort::Balanced);
            }
            pace.observe(
                Drain {
                    at: at + MS / 10,
                    pending: 50_000,
                },
                Effort::Balanced,
            );
            at += MS * 40;
        }
        pace.observe(Drain { at, pending: 0 }, Effort::Balanced);
        assert_eq!(pace.effort(Effort::Balanced), Effort::Balanced);
    }

    #[test]
    fn a_fast_peer_that_falls_behind_keeps_the_bytes_as_they_are() {
        // The transport's buffer is full most of the time, but the peer
        // takes 200 KB a millisecond: 200 MB/s.
        let mut at = start().last;
        // 300 ms of a buffer full three turns in four, the peer taking
        // `per_ms` bytes a millisecond.
        let mut run = |per_ms: usize| {
            let mut pace = start();
            for i in 0..300 {
                at += MS;
                pace.observe(
                    Drain {
                        at,
                        pending: if i % 4 == 3 { 0 } else { 100_000 },
                    },
                    Effort::Balanced,
                );
                pace.produced(per_ms);
            }
            pace.effort(Effort::Balanced)
        };
        assert_eq!(run(200_000), Effort::Store);
        // The same at 20 MB/s is a slow link.
        assert_eq!(run(20_000), Effort::Balanced);
    }

    #[test]
    fn pieces_at_one_moment_count_once() {
        // A caller that passes its turn's moment gives several pieces the
        // same one, the later ones seeing the output of the first queued:
        // that is no wait.
        let mut pace = start();
        let mut at = pace.last;
        for _ in 0..100 {
            at += MS;
            pace.observe(Drain { at, pending: 0 }, Effort::Balanced);
            pace.observe(Drain { at, pending: 90_000 }, Effort::Balanced);
        }
        assert_eq!(pace.effort(Effort::Balanced), Effort::Store);
        // A moment before the last is none either.
        pace.observe(
            Drain {
                at: at - MS * 50,
                pending: 90_000,
            },
            Effort::Balanced,
        );
        run(&mut pace, 30, |_| false, Effort::Balanced);
        assert_eq!(pace.effort(Effort::Balanced), Effort::Store);
    }
}
