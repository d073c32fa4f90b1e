//! The content codec in pieces (D19) against the whole-string codec: the
//! same bytes whatever the split, the same refusals, bounded output.

use jsontp_protocol::message::Encoding;
use jsontp_protocol::message::codec::{self, DecodeError};
use jsontp_protocol::message::{ContentDecoder, ContentEncoder};
use proptest::prelude::*;

/// The JSON text of `content` between its quotes, as serde_json writes it.
fn json_text(content: &str) -> Vec<u8> {
    let quoted = serde_json::to_string(content).unwrap();
    quoted.as_bytes()[1..quoted.len() - 1].to_vec()
}

/// Decodes `text` given in pieces cut at `cuts`, at most `max_out` bytes
/// per call.
fn decode_in_pieces(
    encoding: Encoding,
    text: &[u8],
    cuts: &[usize],
    max_out: usize,
    limit: usize,
) -> Result<Vec<u8>, DecodeError> {
    let mut decoder = ContentDecoder::new(encoding, limit);
    let mut out = Vec::new();
    let mut at = 0;
    let mut bounds: Vec<usize> = cuts.iter().map(|&c| c.min(text.len())).collect();
    bounds.sort_unstable();
    bounds.push(text.len());
    for end in bounds {
        if end < at {
            continue;
        }
        let before = out.len();
        decoder.decode(&text[at..end], &mut out, max_out)?;
        assert!(out.len() - before <= max_out);
        while decoder.has_pending() {
            let before = out.len();
            decoder.decode(&[], &mut out, max_out)?;
            assert!(out.len() - before <= max_out);
        }
        at = end;
    }
    loop {
        let before = out.len();
        let done = decoder.finish(&mut out, max_out)?;
        assert!(out.len() - before <= max_out);
        if done {
            return Ok(out);
        }
    }
}

fn encode_in_pieces(encoding: Encoding, bytes: &[u8], piece: usize) -> Vec<u8> {
    let mut encoder = ContentEncoder::new(encoding);
    let mut out = Vec::new();
    for chunk in bytes.chunks(piece.max(1)) {
        encoder.encode(chunk, &mut out).unwrap();
    }
    encoder.finish(&mut out).unwrap();
    out
}

#[test]
fn identity_text_is_escaped_as_serde_json_escapes_it_whatever_the_pieces() {
    let text = "plain, \"quoted\", back\\slash, tab\t, nl\n, \u{1} \u{1f}, é, 日本, \u{1F600}, end";
    for piece in [1, 2, 3, 5, 64] {
        let out = encode_in_pieces(Encoding::Identity, text.as_bytes(), piece);
        assert_eq!(out, json_text(text), "pieces of {piece}");
    }
}

#[test]
fn identity_that_is_not_utf8_is_refused_where_it_breaks() {
    let mut encoder = ContentEncoder::new(Encoding::Identity);
    let mut out = Vec::new();
    encoder.encode(b"abc", &mut out).unwrap();
    let error = encoder.encode(b"de\xff", &mut out).unwrap_err();
    assert_eq!(error.valid_up_to, 5);
    // A sequence cut at the very end is an error only at the finish.
    let mut encoder = ContentEncoder::new(Encoding::Identity);
    encoder
        .encode("é".as_bytes().get(..1).unwrap(), &mut out)
        .unwrap();
    assert!(encoder.finish(&mut out).is_err());
}

#[test]
fn every_split_of_every_encoding_decodes_as_the_whole() {
    let content = "line one\nline \"two\" é \u{1F600}\\ and \u{0} more\n".repeat(20);
    for encoding in Encoding::ALL {
        let text = match encoding {
            Encoding::Identity => json_text(&content),
            other => codec::encode(content.as_bytes(), other).into_bytes(),
        };
        for cut in 0..=text.len() {
            let got = decode_in_pieces(encoding, &text, &[cut], 7, usize::MAX).unwrap();
            assert!(got == content.as_bytes(), "{encoding} cut at {cut}");
        }
    }
}

#[test]
fn bombs_stop_at_the_limit_with_bounded_pieces() {
    let zeros = vec![0u8; 64 << 20];
    for encoding in [Encoding::Gzip, Encoding::Deflate, Encoding::Br] {
        let text = codec::encode(&zeros, encoding);
        let got = decode_in_pieces(encoding, text.as_bytes(), &[], 64 * 1024, 1 << 20);
        assert_eq!(got, Err(DecodeError::TooLarge { limit: 1 << 20 }), "{encoding}");
    }
    let text = json_text(&"x".repeat(5000));
    assert_eq!(
        decode_in_pieces(Encoding::Identity, &text, &[100], 64, 4999),
        Err(DecodeError::TooLarge { limit: 4999 })
    );
    assert_eq!(
        decode_in_pieces(Encoding::Identity, &text, &[100], 64, 5000).map(|v| v.len()),
        Ok(5000)
    );
}

#[test]
fn empty_content_is_empty_in_every_encoding_and_truncation_is_corrupt() {
    for encoding in Encoding::ALL {
        assert_eq!(decode_in_pieces(encoding, b"", &[], 16, 10), Ok(Vec::new()));
    }
    for encoding in [Encoding::Gzip, Encoding::Deflate, Encoding::Br] {
        let text = codec::encode(b"some content worth compressing, some content", encoding);
        let cut = &text.as_bytes()[..text.len() - 8];
        assert!(matches!(
            decode_in_pieces(encoding, cut, &[3], 16, 1000),
            Err(DecodeError::Corrupt(_))
        ));
    }
    // Invalid UTF-8 in identity text, across a piece boundary.
    assert!(matches!(
        decode_in_pieces(Encoding::Identity, b"ab\xc3", &[3], 16, 100),
        Err(DecodeError::Corrupt(_))
    ));
    assert_eq!(
        decode_in_pieces(Encoding::Identity, "aé".as_bytes(), &[2], 16, 100),
        Ok("aé".as_bytes().to_vec())
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn pieces_decode_like_the_whole(
        content in proptest::collection::vec(any::<u8>(), 0..3000),
        cuts in proptest::collection::vec(0usize..5000, 0..6),
        max_out in 1usize..5000,
        which in 0usize..4,
    ) {
        let encoding = Encoding::ALL[which];
        let (text, expected) = match encoding {
            Encoding::Identity => {
                let s = String::from_utf8_lossy(&content).into_owned();
                (json_text(&s), s.into_bytes())
            }
            other => (codec::encode(&content, other).into_bytes(), content.clone()),
        };
        let got = decode_in_pieces(encoding, &text, &cuts, max_out, usize::MAX).unwrap();
        prop_assert_eq!(got, expected);
    }

    #[test]
    fn encoded_pieces_decode_to_the_content(
        content in proptest::collection::vec(any::<u8>(), 0..3000),
        piece in 1usize..700,
        which in 1usize..4,
    ) {
        let encoding = Encoding::ALL[which];
        let text = encode_in_pieces(encoding, &content, piece);
        let whole = codec::decode(std::str::from_utf8(&text).unwrap(), encoding, usize::MAX).unwrap();
        prop_assert_eq!(whole, content);
    }

    #[test]
    fn corrupted_text_is_refused_as_the_whole_refuses_it(
        content in proptest::collection::vec(any::<u8>(), 1..500),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        which in 1usize..4,
    ) {
        let encoding = Encoding::ALL[which];
        let mut text = codec::encode(&content, encoding).into_bytes();
        let i = at.index(text.len());
        text[i] = byte;
        let whole = std::str::from_utf8(&text)
            .map_err(|_| ())
            .and_then(|t| codec::decode(t, encoding, usize::MAX).map_err(|_| ()));
        let pieces = decode_in_pieces(encoding, &text, &[i], 97, usize::MAX).map_err(|_| ());
        prop_assert_eq!(whole.is_ok(), pieces.is_ok());
        if let (Ok(a), Ok(b)) = (whole, pieces) {
            prop_assert_eq!(a, b);
        }
    }
}

#[test]
fn streamed_random_bytes_go_out_stored_and_text_compressed() {
    // As random as compressed files are (xorshift).
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let random: Vec<u8> = (0..200_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let text = "a line of text that repeats, as logs do\n".repeat(5000);
    for encoding in [Encoding::Gzip, Encoding::Deflate, Encoding::Br] {
        let out = encode_in_pieces(encoding, &random, 16 * 1024);
        // Base64 of a stored stream: 4/3 of the bytes and a little framing.
        assert!(
            out.len() <= random.len() / 3 * 4 + random.len() / 200,
            "{encoding}: {}",
            out.len()
        );
        let back = decode_in_pieces(encoding, &out, &[], usize::MAX, usize::MAX).unwrap();
        assert!(back == random, "{encoding}");
        // In small pieces too: the first half KiB is held to judge by.
        let small = encode_in_pieces(encoding, &random, 100);
        assert!(
            small.len() <= random.len() / 3 * 4 + random.len() / 200,
            "{encoding}: {}",
            small.len()
        );
        assert!(decode_in_pieces(encoding, &small, &[], usize::MAX, usize::MAX).unwrap() == random);
        // The first piece judges the whole stream: text still compresses.
        let out = encode_in_pieces(encoding, text.as_bytes(), 16 * 1024);
        assert!(out.len() < text.len() / 20, "{encoding}: {}", out.len());
    }
}

#[test]
fn no_limit_on_output_is_usize_max() {
    // A caller with no bound on what one call may give passes
    // usize::MAX: every byte comes out, nothing overflows.
    let content = b"a line of text, and \"quoted\" words\n".repeat(500);
    for encoding in [Encoding::Identity, Encoding::Gzip] {
        let text = encode_in_pieces(encoding, &content, 4096);
        let mut decoder = ContentDecoder::new(encoding, usize::MAX);
        let mut out = Vec::new();
        for piece in text.chunks(1000) {
            decoder.decode(piece, &mut out, usize::MAX).unwrap();
        }
        assert!(decoder.finish(&mut out, usize::MAX).unwrap(), "{encoding}");
        assert!(out == content, "{encoding}");
    }
}
