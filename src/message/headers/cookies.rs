//! Cookies (D15): the `cookies` request header as an object of strings or an
//! HTTP-style string `name=value; name=value`; `set-cookies` always an object.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;

use crate::message::ValueError;
use crate::message::headers::weight::trim_ows;

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

    /// The string form `name=value; name=value` (D15), as HTTP's `Cookie`
    /// header writes it: names are tokens (RFC 9110 `tchar`), a value is
    /// anything but `;` with surrounding spaces trimmed, and may be empty.
    /// The empty string, an empty pair (`a=1;;b=2`, a trailing `;`), a pair
    /// without `=`, an empty name and a name given twice are refused.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const NOT_A_LIST: &str = "is not a cookie list like name=value; name=value";
        let mut pairs = Vec::new();
        let mut seen = HashSet::new();
        for pair in s.split(';') {
            let pair = trim_ows(pair);
            let Some((name, value)) = pair.split_once('=') else {
                return Err(ValueError::new(NOT_A_LIST));
            };
            let name = name.trim_end_matches([' ', '\t']);
            if name.is_empty() || !name.bytes().all(is_tchar) {
                return Err(ValueError::new(NOT_A_LIST));
            }
            if !seen.insert(name) {
                return Err(ValueError::new(format!(
                    "{NOT_A_LIST}: cookie \"{name}\" is given twice"
                )));
            }
            pairs.push((name.to_owned(), value.trim_start_matches([' ', '\t']).to_owned()));
        }
        Ok(Cookies { pairs })
    }
}

impl<N: Into<String>, V: Into<String>> FromIterator<(N, V)> for Cookies {
    /// Collects name-value pairs (the object form of D15); a later pair with
    /// the same name replaces the earlier value, keeping its position.
    fn from_iter<I: IntoIterator<Item = (N, V)>>(iter: I) -> Self {
        let mut pairs: Vec<(String, String)> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        for (name, value) in iter {
            let (name, value) = (name.into(), value.into());
            match index.get(&name) {
                Some(&i) => pairs[i].1 = value,
                None => {
                    index.insert(name.clone(), pairs.len());
                    pairs.push((name, value));
                }
            }
        }
        Cookies { pairs }
    }
}

/// RFC 9110 `tchar`: the bytes a token is made of.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(c: &Cookies) -> Vec<(&str, &str)> {
        c.iter().collect()
    }

    #[test]
    fn d15_string_form() {
        let c: Cookies = "session=abc; theme=dark".parse().unwrap();
        assert_eq!(pairs(&c), [("session", "abc"), ("theme", "dark")]);
        let c: Cookies = "  a = x=y ;b=;c=\"q\"  ".parse().unwrap();
        assert_eq!(pairs(&c), [("a", "x=y"), ("b", ""), ("c", "\"q\"")]);
        assert_eq!(c.get("a"), Some("x=y"));
        assert_eq!(c.get("z"), None);
        assert_eq!(c.len(), 3);
    }

    #[test]
    fn d15_malformed_strings_are_refused() {
        for bad in [
            "", " ", "a", "a=1;", "a=1;;b=2", "=1", "a b=1", "a=1; b", "é=1", "a\"=1",
        ] {
            assert_eq!(
                bad.parse::<Cookies>().unwrap_err().reason(),
                "is not a cookie list like name=value; name=value",
                "{bad:?}"
            );
        }
        assert_eq!(
            "a=1; b=2; a=3".parse::<Cookies>().unwrap_err().reason(),
            "is not a cookie list like name=value; name=value: cookie \"a\" is given twice"
        );
    }

    #[test]
    fn d15_object_form_and_set() {
        let mut c: Cookies = [("a", "1"), ("b", "2"), ("a", "3")].into_iter().collect();
        assert_eq!(pairs(&c), [("a", "3"), ("b", "2")]);
        c.set("b", "4");
        c.set("c", "5");
        assert_eq!(pairs(&c), [("a", "3"), ("b", "4"), ("c", "5")]);
        assert!(Cookies::new().is_empty());
    }
}
