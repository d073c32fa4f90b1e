//! Cookies (D15): the `cookies` request header as an object of strings or an
//! HTTP-style string `name=value; name=value`; `set-cookies` always an object.

use std::str::FromStr;

use super::ValueError;

/// Cookie names and values, in the order given. Names are unique.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cookies {
    pairs: Vec<(String, String)>,
}

impl Cookies {
    /// No cookies.
    pub fn new() -> Self {
        Cookies::default()
    }

    /// Adds or replaces a cookie.
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<String>) {
        let (name, value) = (name.into(), value.into());
        match self.pairs.iter_mut().find(|(n, _)| *n == name) {
            Some(pair) => pair.1 = value,
            None => self.pairs.push((name, value)),
        }
    }

    /// The value of a cookie.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// All cookies, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    /// How many cookies there are.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }
}

impl FromStr for Cookies {
    type Err = ValueError;

    /// The string form `name=value; name=value` (D15).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let _ = s;
        todo!("issue 2: cookie strings")
    }
}

impl Cookies {
    /// Built by the message parser from pairs whose names it has already
    /// checked to be unique (with a hash set: `set` is linear, and a message
    /// may carry very many cookies).
    pub(crate) fn from_unique_pairs(pairs: Vec<(String, String)>) -> Cookies {
        Cookies { pairs }
    }
}
