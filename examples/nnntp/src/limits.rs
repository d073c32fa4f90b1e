//! Limits per peer address: at most so many events (sign-ups, failed
//! logins) in a window of time, counted in a table of bounded size.
//!
//! Each address has a fixed window: it begins with the address's first
//! event and lasts [`Rate::per`]; once it has passed, the next event begins
//! a new one. The table forgets an address when its window has passed and
//! room is needed, and, when the table is full of live windows, the one
//! that began first. So no peer can grow it past its capacity; a peer with
//! more addresses than that can make it forget others early, which is the
//! price of a bound. IPv6 addresses are counted by their `/64` prefix,
//! since one host is given a whole one.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most `at_most` events in each `per`, for one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Events allowed in a window.
    pub at_most: u32,
    /// The window's length.
    pub per: Duration,
}

/// One address's window: when it began and the events counted in it.
#[derive(Debug, Clone, Copy)]
struct Window {
    began: Instant,
    counted: u32,
}

/// Events per address, within a [`Rate`], in a table of at most
/// `capacity` addresses.
pub struct PerPeer {
    rate: Rate,
    capacity: usize,
    table: Mutex<HashMap<IpAddr, Window>>,
}

/// The address an event is counted under: IPv4 as it is (an IPv4-mapped
/// IPv6 address as its IPv4 one), IPv6 by its `/64`.
fn counted_as(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !u128::from(u64::MAX)).into()),
        },
    }
}

impl PerPeer {
    /// An empty table for `rate`, holding at most `capacity` addresses
    /// (at least one).
    pub fn new(rate: Rate, capacity: usize) -> PerPeer {
        PerPeer {
            rate,
            capacity: capacity.max(1),
            table: Mutex::new(HashMap::new()),
        }
    }

    /// Counts one event for `peer` at `now`, or, when its window is
    /// already full, counts nothing and says how long until it ends.
    pub fn take(&self, peer: IpAddr, now: Instant) -> Result<(), Duration> {
        let peer = counted_as(peer);
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if !table.contains_key(&peer) && table.len() >= self.capacity {
            self.make_room(&mut table, now);
        }
        let window = table.entry(peer).or_insert(Window {
            began: now,
            counted: 0,
        });
        if now.saturating_duration_since(window.began) >= self.rate.per {
            *window = Window {
                began: now,
                counted: 0,
            };
        }
        if window.counted >= self.rate.at_most {
            return Err(self
                .rate
                .per
                .saturating_sub(now.saturating_duration_since(window.began)));
        }
        window.counted += 1;
        Ok(())
    }

    /// Gives back one event that [`PerPeer::take`] counted for `peer`
    /// (work that was not done, a login that turned out right).
    pub fn give_back(&self, peer: IpAddr) {
        let peer = counted_as(peer);
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(window) = table.get_mut(&peer) {
            window.counted = window.counted.saturating_sub(1);
        }
    }

    /// Addresses in the table now.
    #[allow(dead_code)] // the tests read it
    pub fn len(&self) -> usize {
        self.table.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether the table is empty.
    #[allow(dead_code)] // the tests read it
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every window that has passed, and if that frees nothing,
    /// the one that began first.
    fn make_room(&self, table: &mut HashMap<IpAddr, Window>, now: Instant) {
        let per = self.rate.per;
        table.retain(|_, w| now.saturating_duration_since(w.began) < per);
        if table.len() >= self.capacity {
            let oldest = table.iter().min_by_key(|(_, w)| w.began).map(|(peer, _)| *peer);
            if let Some(oldest) = oldest {
                table.remove(&oldest);
            }
        }
    }
}

/// `human-message` wording for a wait: whole seconds, rounded up.
pub fn seconds(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}
