//! Helpers an application uses to answer the negotiation and conditional
//! headers (D5 level 5, D8, D17, D18). Each returns the [`Status`] to answer
//! with when the request cannot be satisfied.

use std::fmt::Display;

use super::{Date, Encoding, LanguageRange, LanguageTag, MediaRange, MediaType, Status, StatusCode};

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

/// Chooses the response encoding: the first entry of the client's
/// `accept-encoding` (in its order) that is in `available`; `identity` when
/// the header is absent. `412` when nothing listed can be produced (D8).
///
/// `accepted` holds the encodings the header listed that are known; unknown
/// names were skipped by the parser (D8), so an empty slice means nothing
/// listed is known.
pub fn choose_encoding(accepted: Option<&[Encoding]>, available: &[Encoding]) -> Result<Encoding, Status> {
    let Some(accepted) = accepted else {
        return Ok(Encoding::Identity);
    };
    accepted
        .iter()
        .copied()
        .find(|e| available.contains(e))
        .ok_or_else(|| {
            let listed = if accepted.is_empty() {
                "the listed encodings".to_owned()
            } else {
                list(accepted)
            };
            Status::new(
                StatusCode::PRECONDITION_FAILED,
                format!(
                    "header \"accept-encoding\": none of {listed} can be produced (this server offers {})",
                    list(available)
                ),
            )
        })
}

/// Chooses the response language: the first entry of `accept-language` that
/// `offered` contains, or `offered[0]` for `*` or no header. `406` when no
/// entry matches (D18). An empty `offered` is taken as the default
/// `[en-US]`.
pub fn choose_language(
    accepted: Option<&[LanguageRange]>,
    offered: &[LanguageTag],
) -> Result<LanguageTag, Status> {
    let offered = if offered.is_empty() {
        &[LanguageTag::EN_US][..]
    } else {
        offered
    };
    let Some(accepted) = accepted else {
        return Ok(offered[0]);
    };
    accepted
        .iter()
        .find_map(|range| match range {
            LanguageRange::Any => Some(offered[0]),
            LanguageRange::Tag(tag) => offered.contains(tag).then_some(*tag),
        })
        .ok_or_else(|| {
            Status::new(
                StatusCode::NOT_ACCEPTABLE,
                format!(
                    "header \"accept-language\": none of {} is offered (this server offers {})",
                    list(accepted),
                    list(offered)
                ),
            )
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

/// Checks `accept` against the media type a resource is offered in: `415`
/// when no range matches (reference: accept). An empty list matches
/// nothing.
pub fn check_accept(accept: Option<&[MediaRange]>, offered: &MediaType) -> Result<(), Status> {
    match accept {
        None => Ok(()),
        Some(ranges) if ranges.iter().any(|r| r.matches(offered)) => Ok(()),
        Some(ranges) => Err(Status::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "header \"accept\": none of {} can be provided (this resource is {offered})",
                list(ranges)
            ),
        )),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use Condition::*;
    use Encoding::*;

    fn tag(s: &str) -> LanguageTag {
        s.parse().unwrap()
    }

    fn media(s: &str) -> MediaType {
        s.parse().unwrap()
    }

    fn ranges(items: &[&str]) -> Vec<MediaRange> {
        items.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn d8_encoding_in_the_clients_order() {
        assert_eq!(choose_encoding(None, &Encoding::ALL), Ok(Identity));
        assert_eq!(
            choose_encoding(Some(&[Deflate, Gzip]), &Encoding::ALL),
            Ok(Deflate)
        );
        assert_eq!(choose_encoding(Some(&[Br]), &Encoding::ALL), Ok(Br));
        assert_eq!(choose_encoding(Some(&[Br, Gzip]), &[Identity, Gzip]), Ok(Gzip));
        let refused = choose_encoding(Some(&[Br, Deflate]), &[Identity, Gzip]).unwrap_err();
        assert_eq!(refused.code, StatusCode::PRECONDITION_FAILED);
        assert_eq!(
            refused.human_message,
            "header \"accept-encoding\": none of br, deflate can be produced (this server offers identity, gzip)"
        );
        // Every listed name was unknown (skipped by the parser, D8).
        let refused = choose_encoding(Some(&[]), &Encoding::ALL).unwrap_err();
        assert_eq!(refused.code, StatusCode::PRECONDITION_FAILED);
        assert_eq!(
            refused.human_message,
            "header \"accept-encoding\": none of the listed encodings can be produced \
             (this server offers identity, gzip, deflate, br)"
        );
    }

    #[test]
    fn d18_language() {
        let offered = [LanguageTag::EN_US, tag("fr-FR")];
        assert_eq!(choose_language(None, &offered), Ok(LanguageTag::EN_US));
        let fr = [LanguageRange::Tag(tag("fr-FR"))];
        assert_eq!(choose_language(Some(&fr), &offered), Ok(tag("fr-FR")));
        let de_then_any = [LanguageRange::Tag(tag("de-DE")), LanguageRange::Any];
        assert_eq!(
            choose_language(Some(&de_then_any), &offered),
            Ok(LanguageTag::EN_US)
        );
        assert_eq!(
            choose_language(Some(&fr), &[]).unwrap_err().code,
            StatusCode::NOT_ACCEPTABLE
        );
        let refused = choose_language(Some(&fr), &[LanguageTag::EN_US]).unwrap_err();
        assert_eq!(refused.code, StatusCode::NOT_ACCEPTABLE);
        assert_eq!(
            refused.human_message,
            "header \"accept-language\": none of fr-FR is offered (this server offers en-US)"
        );
        assert_eq!(
            choose_language(Some(&[]), &offered).unwrap_err().code,
            StatusCode::NOT_ACCEPTABLE
        );
        assert_eq!(
            choose_language(Some(&[LanguageRange::Any]), &[]),
            Ok(LanguageTag::EN_US)
        );
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

    #[test]
    fn d5_accept() {
        let txt = media("text/plain");
        assert_eq!(check_accept(None, &txt), Ok(()));
        assert_eq!(
            check_accept(Some(&ranges(&["image/png", "text/*"])), &txt),
            Ok(())
        );
        assert_eq!(check_accept(Some(&ranges(&["*/*"])), &txt), Ok(()));
        let refused = check_accept(Some(&ranges(&["image/png", "application/json"])), &txt).unwrap_err();
        assert_eq!(refused.code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert_eq!(
            refused.human_message,
            "header \"accept\": none of image/png, application/json can be provided (this resource is text/plain)"
        );
        assert!(check_accept(Some(&[]), &txt).is_err());
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
}
