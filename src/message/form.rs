//! `POST` form content (D11): `application/x-www-form-urlencoded`, that is
//! `k=v&k=v` with percent-decoding and `+` as a space.

/// Parses form content into pairs, in order, or `None` when it is not
/// form-encoded (then the request goes on with the raw content, D11).
///
/// Not form-encoded: a pair without `=` (this includes an empty pair, so
/// `a=1&&b=2` and a trailing `&`), a `%` not followed by two hex digits, or
/// a name or value that is not UTF-8 once decoded. The empty content is the
/// empty form, `Some(vec![])`: there is nothing in it that is not a form.
/// Empty names (`=v`) and values (`k=`) are kept, as browsers send them;
/// repeated names are kept in order.
pub fn parse_form(content: &str) -> Option<Vec<(String, String)>> {
    if content.is_empty() {
        return Some(Vec::new());
    }
    content
        .split('&')
        .map(|pair| {
            let (name, value) = pair.split_once('=')?;
            Some((decode_component(name)?, decode_component(value)?))
        })
        .collect()
}

/// `+` as a space, `%XX` as the byte `XX`, then UTF-8.
fn decode_component(s: &str) -> Option<String> {
    if !s.contains(['%', '+']) {
        return Some(s.to_owned());
    }
    let mut bytes = Vec::with_capacity(s.len());
    let mut rest = s.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        rest = tail;
        match b {
            b'+' => bytes.push(b' '),
            b'%' => {
                let (&[hi, lo], tail) = rest.split_first_chunk::<2>()?;
                bytes.push(hex(hi)? << 4 | hex(lo)?);
                rest = tail;
            }
            _ => bytes.push(b),
        }
    }
    String::from_utf8(bytes).ok()
}

fn hex(digit: u8) -> Option<u8> {
    char::from(digit).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(s: &str) -> Option<Vec<(String, String)>> {
        parse_form(s)
    }

    fn pairs(expected: &[(&str, &str)]) -> Option<Vec<(String, String)>> {
        Some(
            expected
                .iter()
                .map(|&(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        )
    }

    #[test]
    fn d11_form_content() {
        assert_eq!(form("a=1&b=two"), pairs(&[("a", "1"), ("b", "two")]));
        assert_eq!(
            form("name=J%C3%BCrgen+M%c3%bcller"),
            pairs(&[("name", "Jürgen Müller")])
        );
        assert_eq!(form("q=%41%2b%25%26%3D"), pairs(&[("q", "A+%&=")]));
        assert_eq!(form("a=x=y"), pairs(&[("a", "x=y")]));
        assert_eq!(form("a=&=b&a=2"), pairs(&[("a", ""), ("", "b"), ("a", "2")]));
        assert_eq!(form("k%20=v+"), pairs(&[("k ", "v ")]));
        assert_eq!(form(""), pairs(&[]));
    }

    #[test]
    fn d11_not_form_content() {
        // Stray `%`s and empty pairs: not form data, so the raw content goes on.
        assert_eq!(form("%%%=&&=%zz"), None);
        for bad in [
            "hello", "a=1&b", "a=1&&b=2", "a=1&", "&", "a=%4", "a=%", "a=%g1", "a=%ff", "a=%C3",
        ] {
            assert_eq!(form(bad), None, "{bad:?}");
        }
    }
}
