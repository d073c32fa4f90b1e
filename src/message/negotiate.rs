//! Helpers an application uses to answer the negotiation and conditional
//! headers (D5 level 5, D8, D17, D18). Each returns the [`Status`] to answer
//! with when the request cannot be satisfied.

use std::fmt::Display;

use super::{
    Date, Encoding, EncodingRange, Headers, LanguageRange, LanguageTag, MediaRange, MediaType, Method,
    Status, StatusCode, Weight, Weighted,
};

/// `a, b, c`, or `(none)` for an empty list: for human messages.
fn list<T: Display>(items: impl IntoIterator<Item = T>) -> String {
    let mut out = String::new();
    for item in items {
        if !out.is_empty() {
            out.push_str(", ");
        }
        out.push_str(&item.to_string());
    }
    if out.is_empty() {
        out.push_str("(none)");
    }
    out
}

/// What a response's content is, as far as its encoding goes: `identity`
/// carries only UTF-8 text; the compressed encodings carry any bytes (D9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContentKind {
    /// UTF-8 text: every encoding can carry it.
    Text,
    /// Bytes that are not UTF-8: only `gzip`, `deflate` and `br` can.
    Binary,
}

impl ContentKind {
    /// The kind of `content`.
    pub fn of(content: &[u8]) -> ContentKind {
        match std::str::from_utf8(content) {
            Ok(_) => ContentKind::Text,
            Err(_) => ContentKind::Binary,
        }
    }

    /// Whether `encoding` can carry content of this kind.
    pub fn fits(self, encoding: Encoding) -> bool {
        self == ContentKind::Text || encoding != Encoding::Identity
    }
}

/// Where an offer stands in the client's list (D8): the weight of the
/// entry that names it, else of the first wildcard entry, with that entry's
/// position. `None`: no entry applies, so the offer is not acceptable.
fn rank<T>(
    entries: &[Weighted<T>],
    names: impl Fn(&T) -> bool,
    is_wildcard: impl Fn(&T) -> bool,
) -> Option<(Weight, usize)> {
    let position = entries
        .iter()
        .position(|e| names(&e.value))
        .or_else(|| entries.iter().position(|e| is_wildcard(&e.value)))?;
    Some((entries[position].weight, position))
}

/// The offer the client prefers (D8): the highest weight above 0, then the
/// entry listed first, then the server's own order. `None` when no offer is
/// acceptable.
fn preferred<O>(
    offers: impl IntoIterator<Item = O>,
    rank: impl Fn(&O) -> Option<(Weight, usize)>,
) -> Option<O> {
    let mut best: Option<(Weight, usize, O)> = None;
    for offer in offers {
        let Some((weight, position)) = rank(&offer) else {
            continue;
        };
        if !weight.is_acceptable() {
            continue;
        }
        let better = match &best {
            None => true,
            Some((w, p, _)) => weight > *w || (weight == *w && position < *p),
        };
        if better {
            best = Some((weight, position, offer));
        }
    }
    best.map(|(_, _, offer)| offer)
}

/// The entries of a list that are acceptable at all (weight above 0).
fn acceptable<T>(entries: &[Weighted<T>]) -> impl Iterator<Item = &Weighted<T>> {
    entries.iter().filter(|e| e.weight.is_acceptable())
}

/// Chooses the response encoding (D8, D9) for content of `kind`, among the
/// encodings the server can produce (`available`, in its own order of
/// preference).
///
/// - No `accept-encoding` (or an empty one): every encoding is acceptable,
///   and the server picks: `identity` for text, the first compressed
///   encoding of `available` for bytes that are not UTF-8.
/// - Otherwise the client's preference among the encodings that can carry
///   the content: by weight, then by the order of its entries; `*` stands
///   for every encoding it does not name; `q=0` excludes. Nothing
///   acceptable is `412`, also when only `identity` is acceptable and the
///   content is not text (never `406`, which is for `accept-language`).
///
/// Call it first with [`ContentKind::Text`] to check what needs no content
/// (a list of nothing this server can produce is `412` whatever the
/// content), and again once the content is known. `500` when `available`
/// itself holds nothing that can carry the content: a server that cannot
/// send it, whatever the client asks.
pub fn choose_encoding(
    accepted: Option<&[Weighted<EncodingRange>]>,
    available: &[Encoding],
    kind: ContentKind,
) -> Result<Encoding, Status> {
    let carried = || available.iter().copied().filter(|e| kind.fits(*e));
    let Some(entries) = accepted else {
        let pick = match kind {
            ContentKind::Text => available
                .iter()
                .copied()
                .find(|e| *e == Encoding::Identity)
                .or_else(|| available.first().copied()),
            ContentKind::Binary => carried().next(),
        };
        return pick.ok_or_else(|| {
            Status::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!(
                    "the content cannot be sent: it is {}, and this server offers {}",
                    match kind {
                        ContentKind::Text => "text",
                        ContentKind::Binary => "not UTF-8 text, so it can only be sent compressed",
                    },
                    list(available)
                ),
            )
        });
    };
    let rank = |e: &Encoding| {
        rank(
            entries,
            |r| *r == EncodingRange::Encoding(*e),
            |r| *r == EncodingRange::Any,
        )
    };
    preferred(carried(), rank).ok_or_else(|| {
        let wanted: Vec<_> = acceptable(entries).collect();
        let message = if wanted.is_empty() {
            format!(
                "header \"accept-encoding\": it accepts no encoding this server can produce \
                 (this server offers {})",
                list(available)
            )
        } else if kind == ContentKind::Binary && preferred(available.iter().copied(), |e| rank(e)).is_some() {
            format!(
                "header \"accept-encoding\": the content is not UTF-8 text, so it can only be sent \
                 compressed ({}), and the header accepts only {}",
                list(carried()),
                list(wanted)
            )
        } else {
            format!(
                "header \"accept-encoding\": none of {} can be produced (this server offers {})",
                list(wanted),
                list(available)
            )
        };
        Status::new(StatusCode::PRECONDITION_FAILED, message)
    })
}

/// Chooses the response language (D8, D18): the offered language the
/// client prefers, by weight, then by the order of its entries (`*`
/// standing for every language it does not name, `q=0` excluding), then
/// the order of `offered`. No `accept-language`: `offered[0]`. `406` when
/// nothing offered is acceptable. An empty `offered` is taken as the
/// default `[en-US]`.
pub fn choose_language(
    accepted: Option<&[Weighted<LanguageRange>]>,
    offered: &[LanguageTag],
) -> Result<LanguageTag, Status> {
    let offered = if offered.is_empty() {
        &[LanguageTag::EN_US][..]
    } else {
        offered
    };
    let Some(entries) = accepted else {
        return Ok(offered[0]);
    };
    let rank = |tag: &LanguageTag| {
        rank(
            entries,
            |r| *r == LanguageRange::Tag(*tag),
            |r| *r == LanguageRange::Any,
        )
    };
    preferred(offered.iter().copied(), rank).ok_or_else(|| {
        let wanted: Vec<_> = acceptable(entries).collect();
        let message = if wanted.is_empty() {
            format!(
                "header \"accept-language\": it accepts no language (this server offers {})",
                list(offered)
            )
        } else {
            format!(
                "header \"accept-language\": none of {} is offered (this server offers {})",
                list(wanted),
                list(offered)
            )
        };
        Status::new(StatusCode::NOT_ACCEPTABLE, message)
    })
}

/// Checks the request's `content-type` against the media types the server
/// takes (essence compared, parameters allowed): `415` when unsupported.
pub fn check_content_type(content_type: Option<&MediaType>, supported: &[MediaType]) -> Result<(), Status> {
    match content_type {
        None => Ok(()),
        Some(ct) if supported.iter().any(|s| s.essence() == ct.essence()) => Ok(()),
        Some(ct) => Err(Status::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "header \"content-type\": {} is not supported (this server takes {})",
                ct.essence(),
                list(supported.iter().map(MediaType::essence))
            ),
        )),
    }
}

/// The weight `accept` gives `media`: that of the most specific range that
/// matches it, the first of equally specific ones (RFC 9110 §12.5.1), with
/// that entry's position.
fn media_rank(entries: &[Weighted<MediaRange>], media: &MediaType) -> Option<(Weight, usize)> {
    entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.value.matches(media))
        .rev()
        .max_by_key(|(_, e)| e.value.specificity())
        .map(|(position, e)| (e.weight, position))
}

/// Chooses among the media types a resource can be had in (`offered`, in
/// the server's order): the one `accept` prefers, by weight (the most
/// specific matching range decides), then by the order of its entries,
/// then the server's order. No `accept`: `offered[0]`. `415` when nothing
/// offered is acceptable (reference: accept, D5 level 5), also when
/// `offered` is empty.
pub fn choose_media_type<'m>(
    accept: Option<&[Weighted<MediaRange>]>,
    offered: &'m [MediaType],
) -> Result<&'m MediaType, Status> {
    let chosen = match accept {
        None => offered.first(),
        Some(entries) => preferred(offered, |media| media_rank(entries, media)),
    };
    chosen.ok_or_else(|| {
        let wanted = accept.map(|e| list(acceptable(e))).unwrap_or_default();
        Status::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "header \"accept\": none of {wanted} can be provided (this resource is {})",
                list(offered)
            ),
        )
    })
}

/// Checks `accept` against the one media type a resource is offered in:
/// `415` when no range with a weight above 0 matches it (see
/// [`choose_media_type`]).
pub fn check_accept(accept: Option<&[Weighted<MediaRange>]>, offered: &MediaType) -> Result<(), Status> {
    choose_media_type(accept, std::slice::from_ref(offered)).map(|_| ())
}

/// What the conditional headers say about a resource (D17).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// Serve the resource.
    Proceed,
    /// `304`: not modified since `if-modified-since`.
    NotModified,
    /// `412`: modified since `if-unmodified-since`, or a conditional header
    /// names a resource that cannot be provided.
    PreconditionFailed,
}

/// Evaluates `if-modified-since` / `if-unmodified-since` against the
/// resource's last-modified time (`None`: the resource cannot be provided).
/// Whole seconds are compared (D16).
///
/// In HTTP's order (RFC 9110 §13.2.2): a conditional header on a resource
/// that cannot be provided is `412` (D17); then `if-unmodified-since`
/// (`412` when modified after it), then `if-modified-since` (`304` when not
/// modified after it). Without conditional headers: [`Condition::Proceed`],
/// whatever `last_modified` is (the application answers `404` itself).
pub fn evaluate_conditions(
    if_modified_since: Option<Date>,
    if_unmodified_since: Option<Date>,
    last_modified: Option<Date>,
) -> Condition {
    if if_modified_since.is_none() && if_unmodified_since.is_none() {
        return Condition::Proceed;
    }
    let Some(last_modified) = last_modified else {
        return Condition::PreconditionFailed;
    };
    if if_unmodified_since.is_some_and(|since| last_modified > since) {
        return Condition::PreconditionFailed;
    }
    if if_modified_since.is_some_and(|since| last_modified <= since) {
        return Condition::NotModified;
    }
    Condition::Proceed
}

/// [`evaluate_conditions`] as the status to answer with, if not
/// [`Condition::Proceed`], with a human message naming the header (D12).
pub fn condition_status(
    if_modified_since: Option<Date>,
    if_unmodified_since: Option<Date>,
    last_modified: Option<Date>,
) -> Option<Status> {
    let condition = evaluate_conditions(if_modified_since, if_unmodified_since, last_modified);
    let header = if if_unmodified_since.is_some() {
        ("if-unmodified-since", if_unmodified_since)
    } else {
        ("if-modified-since", if_modified_since)
    };
    match (condition, last_modified, header) {
        (Condition::Proceed, _, _) => None,
        (Condition::NotModified, _, _) => Some(Status::new(
            StatusCode::NOT_MODIFIED,
            "not modified since the date in header \"if-modified-since\"",
        )),
        (Condition::PreconditionFailed, None, (name, _)) => Some(Status::new(
            StatusCode::PRECONDITION_FAILED,
            format!("header \"{name}\": the resource cannot be provided, so the condition cannot hold"),
        )),
        (Condition::PreconditionFailed, Some(modified), (name, since)) => Some(Status::new(
            StatusCode::PRECONDITION_FAILED,
            format!(
                "header \"{name}\": the resource was modified at {modified}, after {}",
                since.map(|d| d.to_string()).unwrap_or_default()
            ),
        )),
    }
}

/// The conditional headers of a request as D17 applies them to its
/// method, against the resource's last-modification time (`None`: the
/// server cannot provide the resource). `Err` is the status to answer
/// with: `304`, or `412` (D5 level 6).
///
/// - `if-unmodified-since` applies to `GET`, `POST`, `PUT` and `DELETE`,
///   and is evaluated first; `if-modified-since` to `GET` and `POST`
///   only, ignored on the others. `OPTIONS` ignores both.
/// - A header that applies, on a resource that cannot be provided, is
///   `412`: call this before answering `404`. A `PUT` that creates a file
///   with `if-unmodified-since` is therefore `412`.
pub fn check_conditions(
    method: Method,
    headers: &Headers,
    last_modified: Option<Date>,
) -> Result<(), Status> {
    let (ims, ius) = match method {
        Method::Get | Method::Post => (headers.if_modified_since(), headers.if_unmodified_since()),
        Method::Put | Method::Delete => (None, headers.if_unmodified_since()),
        Method::Options => (None, None),
    };
    condition_status(ims, ius, last_modified).map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Condition::*;
    use ContentKind::*;
    use Encoding::*;

    fn tag(s: &str) -> LanguageTag {
        s.parse().unwrap()
    }

    fn media(s: &str) -> MediaType {
        s.parse().unwrap()
    }

    fn entries<T>(items: &[&str]) -> Vec<Weighted<T>>
    where
        Weighted<T>: std::str::FromStr<Err = crate::message::ValueError>,
    {
        items.iter().map(|s| s.parse().unwrap()).collect()
    }

    fn encoding(list: &[&str], kind: ContentKind) -> Result<Encoding, Status> {
        choose_encoding(Some(&entries(list)), &Encoding::ALL, kind)
    }

    #[test]
    fn d8_no_accept_encoding_lets_the_server_pick() {
        assert_eq!(choose_encoding(None, &Encoding::ALL, Text), Ok(Identity));
        assert_eq!(choose_encoding(None, &Encoding::ALL, Binary), Ok(Gzip));
        assert_eq!(choose_encoding(None, &[Identity, Br], Binary), Ok(Br));
        assert_eq!(choose_encoding(None, &[Deflate], Text), Ok(Deflate));
        let none = choose_encoding(None, &[Identity], Binary).unwrap_err();
        assert_eq!(none.code, StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[test]
    fn d8_encoding_by_weight_then_order() {
        assert_eq!(encoding(&["deflate", "gzip"], Text), Ok(Deflate));
        assert_eq!(encoding(&["br"], Text), Ok(Br));
        assert_eq!(encoding(&["gzip;q=0.5", "br;q=0.8"], Text), Ok(Br));
        assert_eq!(encoding(&["gzip;q=1", "br"], Text), Ok(Gzip));
        assert_eq!(encoding(&["identity;q=0.1", "deflate;q=0.2"], Text), Ok(Deflate));
        // `*` stands for the encodings not named; the server's order among them.
        assert_eq!(encoding(&["*"], Text), Ok(Identity));
        assert_eq!(encoding(&["*"], Binary), Ok(Gzip));
        assert_eq!(encoding(&["identity;q=0", "*"], Text), Ok(Gzip));
        assert_eq!(encoding(&["*;q=0.5", "br"], Text), Ok(Br));
        assert_eq!(encoding(&["gzip;q=0", "*;q=0.1"], Binary), Ok(Deflate));
        assert_eq!(
            choose_encoding(Some(&entries(&["br", "gzip"])), &[Identity, Gzip], Text),
            Ok(Gzip)
        );
    }

    #[test]
    fn d8_binary_content_travels_compressed() {
        assert_eq!(encoding(&["identity", "br"], Binary), Ok(Br));
        assert_eq!(encoding(&["identity;q=1", "br;q=0.1"], Binary), Ok(Br));
        let refused = encoding(&["identity"], Binary).unwrap_err();
        assert_eq!(
            refused.code,
            StatusCode::PRECONDITION_FAILED,
            "D8: 412, never 406"
        );
        assert_eq!(
            refused.human_message,
            "header \"accept-encoding\": the content is not UTF-8 text, so it can only be sent \
             compressed (gzip, deflate, br), and the header accepts only identity"
        );
    }

    #[test]
    fn d8_nothing_acceptable_is_412() {
        let refused =
            choose_encoding(Some(&entries(&["br", "deflate"])), &[Identity, Gzip], Text).unwrap_err();
        assert_eq!(refused.code, StatusCode::PRECONDITION_FAILED);
        assert_eq!(
            refused.human_message,
            "header \"accept-encoding\": none of br, deflate can be produced (this server offers identity, gzip)"
        );
        // Every weight 0, or (as the parser holds it) only unknown names.
        for list in [&["gzip;q=0", "identity;q=0"][..], &["*;q=0"]] {
            let refused = encoding(list, Text).unwrap_err();
            assert_eq!(refused.code, StatusCode::PRECONDITION_FAILED);
            assert_eq!(
                refused.human_message,
                "header \"accept-encoding\": it accepts no encoding this server can produce \
                 (this server offers identity, gzip, deflate, br)"
            );
        }
    }

    fn language(list: &[&str], offered: &[LanguageTag]) -> Result<LanguageTag, Status> {
        choose_language(Some(&entries(list)), offered)
    }

    #[test]
    fn d18_language() {
        let offered = [LanguageTag::EN_US, tag("fr-FR")];
        assert_eq!(choose_language(None, &offered), Ok(LanguageTag::EN_US));
        assert_eq!(language(&["fr-FR"], &offered), Ok(tag("fr-FR")));
        assert_eq!(language(&["de-DE", "*"], &offered), Ok(LanguageTag::EN_US));
        assert_eq!(
            language(&["fr-FR"], &[]).unwrap_err().code,
            StatusCode::NOT_ACCEPTABLE
        );
        let refused = language(&["fr-FR"], &[LanguageTag::EN_US]).unwrap_err();
        assert_eq!(refused.code, StatusCode::NOT_ACCEPTABLE);
        assert_eq!(
            refused.human_message,
            "header \"accept-language\": none of fr-FR is offered (this server offers en-US)"
        );
        assert_eq!(language(&["*"], &[]), Ok(LanguageTag::EN_US));
    }

    #[test]
    fn d8_language_weights() {
        let offered = [LanguageTag::EN_US, tag("fr-FR")];
        assert_eq!(language(&["en-US;q=0.8", "fr-FR"], &offered), Ok(tag("fr-FR")));
        assert_eq!(language(&["en-US;q=0.8"], &offered), Ok(LanguageTag::EN_US));
        assert_eq!(language(&["en-US;q=0", "*"], &offered), Ok(tag("fr-FR")));
        assert_eq!(language(&["*;q=0.5", "fr-FR;q=0.6"], &offered), Ok(tag("fr-FR")));
        let refused = language(&["en-US;q=0"], &offered).unwrap_err();
        assert_eq!(refused.code, StatusCode::NOT_ACCEPTABLE);
        assert_eq!(
            refused.human_message,
            "header \"accept-language\": it accepts no language (this server offers en-US, fr-FR)"
        );
        assert!(language(&["*;q=0"], &offered).is_err());
    }

    #[test]
    fn d5_content_type() {
        let supported = [media("text/plain"), media("application/json")];
        assert_eq!(check_content_type(None, &supported), Ok(()));
        assert_eq!(
            check_content_type(Some(&media("Text/Plain; charset=utf-8")), &supported),
            Ok(())
        );
        let refused =
            check_content_type(Some(&media("application/x-jsontp-unsupported")), &supported).unwrap_err();
        assert_eq!(refused.code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert_eq!(
            refused.human_message,
            "header \"content-type\": application/x-jsontp-unsupported is not supported \
             (this server takes text/plain, application/json)"
        );
    }

    fn accept(list: &[&str], offered: &str) -> Result<(), Status> {
        check_accept(Some(&entries(list)), &media(offered))
    }

    #[test]
    fn d5_accept() {
        let txt = media("text/plain");
        assert_eq!(check_accept(None, &txt), Ok(()));
        assert_eq!(accept(&["image/png", "text/*"], "text/plain"), Ok(()));
        assert_eq!(accept(&["*/*"], "text/plain"), Ok(()));
        let refused = accept(&["image/png", "application/json"], "text/plain").unwrap_err();
        assert_eq!(refused.code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert_eq!(
            refused.human_message,
            "header \"accept\": none of image/png, application/json can be provided (this resource is text/plain)"
        );
    }

    #[test]
    fn d8_accept_weights_the_most_specific_range_decides() {
        assert!(accept(&["text/plain;q=0"], "text/plain").is_err());
        assert!(accept(&["*/*", "text/plain;q=0"], "text/plain").is_err());
        assert_eq!(accept(&["*/*", "text/plain;q=0"], "text/html"), Ok(()));
        assert_eq!(accept(&["text/*;q=0", "text/plain"], "text/plain"), Ok(()));
        assert!(accept(&["text/*;q=0", "*/*"], "text/html").is_err());
        let offered = [media("application/json"), media("text/plain")];
        let pick =
            |list: &[&str]| choose_media_type(Some(&entries(list)), &offered).map(|m| m.essence().to_owned());
        assert_eq!(pick(&["*/*"]), Ok("application/json".into()));
        assert_eq!(pick(&["text/*", "*/*;q=0.5"]), Ok("text/plain".into()));
        assert_eq!(
            pick(&["application/json;q=0.2", "text/plain;q=0.3"]),
            Ok("text/plain".into())
        );
        assert_eq!(
            choose_media_type(None, &offered).map(MediaType::essence),
            Ok("application/json")
        );
        assert!(choose_media_type(None, &[]).is_err());
    }

    #[test]
    fn d17_conditions() {
        let d = Date::from_unix_seconds;
        let old = Some(d(1_577_836_800)); // 2020-01-01, old.txt
        let later = Some(d(1_622_505_600)); // 2021-06-01
        assert_eq!(evaluate_conditions(None, None, old), Proceed);
        assert_eq!(evaluate_conditions(None, None, None), Proceed);
        // if-modified-since: not modified after it, equal included.
        assert_eq!(evaluate_conditions(later, None, old), NotModified);
        assert_eq!(evaluate_conditions(old, None, old), NotModified);
        assert_eq!(evaluate_conditions(old, None, later), Proceed);
        // if-unmodified-since.
        assert_eq!(evaluate_conditions(None, later, old), Proceed);
        assert_eq!(evaluate_conditions(None, old, old), Proceed);
        assert_eq!(evaluate_conditions(None, old, later), PreconditionFailed);
        // Cannot be provided: 412 with either header.
        assert_eq!(evaluate_conditions(later, None, None), PreconditionFailed);
        assert_eq!(evaluate_conditions(None, later, None), PreconditionFailed);
        // Both: if-unmodified-since first, 412 wins over 304.
        assert_eq!(evaluate_conditions(later, old, later), PreconditionFailed);
        assert_eq!(evaluate_conditions(later, later, old), NotModified);
        assert_eq!(evaluate_conditions(old, later, later), Proceed);
    }

    #[test]
    fn d17_statuses_name_the_header() {
        let d = Date::from_unix_seconds;
        assert_eq!(condition_status(None, None, Some(d(5))), None);
        let s = condition_status(Some(d(10)), None, Some(d(5))).unwrap();
        assert_eq!(s.code, StatusCode::NOT_MODIFIED);
        let s = condition_status(Some(d(10)), None, None).unwrap();
        assert_eq!(s.code, StatusCode::PRECONDITION_FAILED);
        assert_eq!(
            s.human_message,
            "header \"if-modified-since\": the resource cannot be provided, so the condition cannot hold"
        );
        let s = condition_status(None, Some(d(0)), Some(d(61))).unwrap();
        assert_eq!(s.code, StatusCode::PRECONDITION_FAILED);
        assert_eq!(
            s.human_message,
            "header \"if-unmodified-since\": the resource was modified at \
             1970-01-01T00:01:01Z+0000, after 1970-01-01T00:00:00Z+0000"
        );
    }

    #[test]
    fn d17_which_methods_the_conditions_apply_to() {
        let d = Date::from_unix_seconds;
        let (old, later) = (Some(d(100)), Some(d(200)));
        let both = Headers::new()
            .with_if_modified_since(d(200))
            .with_if_unmodified_since(d(150));
        let code = |m: Method, h: &Headers, modified: Option<Date>| {
            check_conditions(m, h, modified).err().map(|s| s.code.as_u16())
        };
        // if-modified-since: GET and POST only.
        let ims = Headers::new().with_if_modified_since(d(200));
        for m in [Method::Get, Method::Post] {
            assert_eq!(code(m, &ims, old), Some(304), "{m}");
            assert_eq!(code(m, &ims, None), Some(412), "{m}");
        }
        for m in [Method::Put, Method::Delete, Method::Options] {
            assert_eq!(code(m, &ims, old), None, "{m}");
            assert_eq!(code(m, &ims, None), None, "{m}");
        }
        // if-unmodified-since: every method but OPTIONS, 412 on a missing resource.
        let ius = Headers::new().with_if_unmodified_since(d(150));
        for m in [Method::Get, Method::Post, Method::Put, Method::Delete] {
            assert_eq!(code(m, &ius, old), None, "{m}");
            assert_eq!(code(m, &ius, later), Some(412), "{m}");
            assert_eq!(code(m, &ius, None), Some(412), "{m}");
        }
        assert_eq!(code(Method::Options, &ius, None), None);
        // Both: if-unmodified-since first, its 412 over the 304.
        assert_eq!(code(Method::Get, &both, later), Some(412));
        assert_eq!(code(Method::Get, &both, old), Some(304));
        assert_eq!(code(Method::Delete, &both, old), None);
    }
}
