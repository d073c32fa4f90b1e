//! One `gzip`, `deflate` or `br` stream whose effort may change between
//! pieces ([`Pace`](super::pace::Pace)), still one valid stream of its
//! encoding: a run of segments, each the bytes as they are (deflate's
//! stored blocks, Brotli's uncompressed meta-blocks) or one compressor's
//! output, inside one framing written here.
//!
//! - gzip (RFC 1952) and zlib (RFC 1950): the header, then deflate blocks
//!   (RFC 1951) that are never final: stored ones, or those of a raw
//!   deflate compressor ended with a sync flush (an empty stored block,
//!   which ends on a byte); then the final empty block and the checksum of
//!   every byte. A compressor that starts after other blocks starts
//!   afresh: it refers only to bytes it saw, which the peer's window holds.
//! - Brotli (RFC 7932): a header of its own (the streamed window, then an
//!   empty metadata meta-block that ends on a byte), then meta-blocks
//!   that are never last: uncompressed ones, or those of an encoder made
//!   to be concatenated (the brotli crate's `catable` and `bare_stream`:
//!   no header of its own, no static dictionary, no distance it did not
//!   write, its first two bytes uncompressed so that the literal context
//!   is its own, and its end on a byte); then the empty last meta-block.

use std::io::Write;

use flate2::{Compress, Crc, FlushCompress};

use super::codec::{Effort, STREAM_WINDOW_BITS, VEC_WRITE};
use super::encoding::Compressed;
use super::stored::{BLOCK, BROTLI_LAST, GATHER, GZIP_HEADER, LAST_BLOCK, ZLIB_HEADER};

/// A Brotli stream's first two bytes, from the lowest bit: a window of 19
/// bits ([`STREAM_WINDOW_BITS`]: `1`, then 2 as `010`), then an empty
/// metadata meta-block (not last `0`, `MNIBBLES` 0 `11`, reserved `0`, no
/// length bytes `00`) and six zero bits of padding.
const BROTLI_HEADER: [u8; 2] = [0x65, 0x00];

/// A compressed stream of changing effort, written as content comes.
pub(super) struct Paced {
    framing: Framing,
    /// The header is written with the first output.
    started: bool,
    segment: Segment,
    /// Bytes of a stored segment not yet in a block: fewer than
    /// [`GATHER`].
    pending: Vec<u8>,
}

/// The framing around the segments, and the check it ends with.
enum Framing {
    /// gzip: CRC-32 and the length.
    Gzip(Crc),
    /// zlib: Adler-32.
    Zlib(adler2::Adler32),
    /// Brotli: none.
    Brotli,
}

/// The segment being written.
enum Segment {
    /// The bytes as they are, gathered in `pending`.
    Stored,
    /// A raw deflate compressor at the level of its effort.
    Deflate(Effort, Box<Compress>),
    /// A concatenable Brotli encoder at the quality of its effort.
    Brotli(Effort, Box<brotli::CompressorWriter<Vec<u8>>>),
}

impl Segment {
    fn effort(&self) -> Effort {
        match self {
            Segment::Stored => Effort::Store,
            Segment::Deflate(effort, _) | Segment::Brotli(effort, _) => *effort,
        }
    }
}

impl Paced {
    /// A stream in the framing of `compressed`.
    pub(super) fn new(compressed: Compressed) -> Paced {
        let framing = match compressed {
            Compressed::Gzip => Framing::Gzip(Crc::new()),
            Compressed::Deflate => Framing::Zlib(adler2::Adler32::new()),
            Compressed::Br => Framing::Brotli,
        };
        Paced {
            framing,
            started: false,
            segment: Segment::Stored,
            pending: Vec::new(),
        }
    }

    /// Appends `bytes`, compressed with `effort`, to `out` (a compressor
    /// may hold some until later). A new effort ends the segment before.
    pub(super) fn write(&mut self, bytes: &[u8], effort: Effort, out: &mut Vec<u8>) {
        self.start(out);
        if bytes.is_empty() {
            return;
        }
        match &mut self.framing {
            Framing::Gzip(crc) => crc.update(bytes),
            Framing::Zlib(adler) => adler.write_slice(bytes),
            Framing::Brotli => {}
        }
        if effort != self.segment.effort() {
            self.end_segment(out);
            self.segment = self.open(effort);
        }
        match &mut self.segment {
            Segment::Stored => {
                let mut pending = std::mem::take(&mut self.pending);
                store(&self.framing, &mut pending, bytes, out);
                self.pending = pending;
            }
            Segment::Deflate(_, compress) => deflate(compress, bytes, FlushCompress::None, out),
            Segment::Brotli(_, writer) => {
                writer.write_all(bytes).expect(VEC_WRITE);
                out.append(writer.get_mut());
            }
        }
    }

    /// Appends the rest: what is held, the end of the stream and its check.
    pub(super) fn finish(mut self, out: &mut Vec<u8>) {
        self.start(out);
        self.end_segment(out);
        match &self.framing {
            Framing::Gzip(crc) => {
                out.extend_from_slice(&LAST_BLOCK);
                out.extend_from_slice(&crc.sum().to_le_bytes());
                out.extend_from_slice(&crc.amount().to_le_bytes());
            }
            Framing::Zlib(adler) => {
                out.extend_from_slice(&LAST_BLOCK);
                out.extend_from_slice(&adler.checksum().to_be_bytes());
            }
            Framing::Brotli => out.extend_from_slice(&BROTLI_LAST),
        }
    }

    fn start(&mut self, out: &mut Vec<u8>) {
        if !self.started {
            self.started = true;
            match self.framing {
                Framing::Gzip(_) => out.extend_from_slice(&GZIP_HEADER),
                Framing::Zlib(_) => out.extend_from_slice(&ZLIB_HEADER),
                Framing::Brotli => out.extend_from_slice(&BROTLI_HEADER),
            }
        }
    }

    /// A segment of `effort`, in this stream's format.
    fn open(&self, effort: Effort) -> Segment {
        if effort == Effort::Store {
            return Segment::Stored;
        }
        match self.framing {
            Framing::Gzip(_) | Framing::Zlib(_) => {
                Segment::Deflate(effort, Box::new(Compress::new(effort.flate_level(), false)))
            }
            Framing::Brotli => {
                let params = brotli::enc::BrotliEncoderParams {
                    quality: effort.brotli_quality() as i32,
                    lgwin: STREAM_WINDOW_BITS as i32,
                    catable: true,
                    appendable: true,
                    bare_stream: true,
                    byte_align: true,
                    use_dictionary: false,
                    ..Default::default()
                };
                Segment::Brotli(
                    effort,
                    Box::new(brotli::CompressorWriter::with_params(Vec::new(), 4096, &params)),
                )
            }
        }
    }

    /// Ends the segment being written on a byte, with nothing held, and
    /// leaves an empty stored one in its place.
    fn end_segment(&mut self, out: &mut Vec<u8>) {
        match std::mem::replace(&mut self.segment, Segment::Stored) {
            Segment::Stored => {
                if !self.pending.is_empty() {
                    block(&self.framing, out, &self.pending);
                    self.pending.clear();
                }
            }
            Segment::Deflate(_, mut compress) => deflate(&mut compress, &[], FlushCompress::Sync, out),
            Segment::Brotli(_, writer) => out.extend_from_slice(&writer.into_inner()),
        }
    }
}

/// Stored bytes, after the `pending` ones: blocks of at least [`GATHER`]
/// bytes, the rest held in `pending`.
fn store(framing: &Framing, pending: &mut Vec<u8>, bytes: &[u8], out: &mut Vec<u8>) {
    if pending.len() + bytes.len() < GATHER {
        pending.extend_from_slice(bytes);
        return;
    }
    // The held bytes lead the first block (they are fewer than a block).
    let first = bytes.len().min(BLOCK - pending.len());
    pending.extend_from_slice(&bytes[..first]);
    out.reserve(pending.len() + bytes.len() + bytes.len().div_ceil(BLOCK) * 5 + 5);
    block(framing, out, pending);
    for rest in bytes[first..].chunks(BLOCK) {
        block(framing, out, rest);
    }
    pending.clear();
}

/// One stored block (not the last) of 1 to [`BLOCK`] bytes.
fn block(framing: &Framing, out: &mut Vec<u8>, bytes: &[u8]) {
    debug_assert!((1..=BLOCK).contains(&bytes.len()));
    match framing {
        Framing::Gzip(_) | Framing::Zlib(_) => {
            let len = bytes.len() as u16;
            // Not final, stored; the rest of the byte is padding.
            out.push(0x00);
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&(!len).to_le_bytes());
        }
        Framing::Brotli => {
            // From the lowest bit: not last, four nibbles of length
            // (`MNIBBLES` 0), the length less one, uncompressed, and
            // padding to the byte.
            let header = ((bytes.len() as u32 - 1) << 3) | 1 << 19;
            out.extend_from_slice(&header.to_le_bytes()[..3]);
        }
    }
    out.extend_from_slice(bytes);
}

/// Runs a raw deflate compressor over all of `input`, appending what it
/// makes to `out`; with a sync flush, until everything given is out and
/// the output ends on a byte.
fn deflate(compress: &mut Compress, mut input: &[u8], flush: FlushCompress, out: &mut Vec<u8>) {
    loop {
        out.reserve(input.len() / 2 + 64);
        let before = compress.total_in();
        compress
            .compress_vec(input, out, flush)
            .expect("a raw deflate stream given bytes cannot fail");
        input = &input[(compress.total_in() - before) as usize..];
        // Room left over: the compressor stopped for want of input.
        if input.is_empty() && out.len() < out.capacity() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    /// Text that compresses, with a period longer than every window.
    fn text(len: usize) -> Vec<u8> {
        super::super::periodic_text(len, |i, word| {
            format!("line {i}: the fox {word} jumps over the dog {}\n", word % 97)
        })
    }

    fn paced(compressed: Compressed, pieces: &[(&[u8], Effort)]) -> Vec<u8> {
        let mut stream = Paced::new(compressed);
        let mut out = Vec::new();
        for (piece, effort) in pieces {
            stream.write(piece, *effort, &mut out);
        }
        stream.finish(&mut out);
        out
    }

    /// The stream read back by flate2's and brotli's own decoders, and
    /// by this crate's.
    fn decoded(compressed: Compressed, stream: &[u8]) -> Vec<u8> {
        let mut back = Vec::new();
        match compressed {
            Compressed::Gzip => {
                flate2::read::GzDecoder::new(stream)
                    .read_to_end(&mut back)
                    .expect("gzip");
            }
            Compressed::Deflate => {
                flate2::read::ZlibDecoder::new(stream)
                    .read_to_end(&mut back)
                    .expect("zlib");
            }
            Compressed::Br => {
                brotli::Decompressor::new(stream, 4096)
                    .read_to_end(&mut back)
                    .expect("brotli");
            }
        }
        let encoding = match compressed {
            Compressed::Gzip => crate::message::Encoding::Gzip,
            Compressed::Deflate => crate::message::Encoding::Deflate,
            Compressed::Br => crate::message::Encoding::Br,
        };
        let ours = crate::message::codec::decode(&super::super::base64::encode(stream), encoding, 1 << 26);
        assert_eq!(
            ours.as_ref(),
            Ok(&back),
            "{compressed:?}: this crate's decoder agrees"
        );
        back
    }

    const ALL: [Compressed; 3] = [Compressed::Gzip, Compressed::Deflate, Compressed::Br];

    #[test]
    fn streams_whose_effort_changes_decode_to_the_content() {
        use Effort::{Balanced, Fast, Store};
        let content = text(3 << 20);
        let pieces: Vec<&[u8]> = content.chunks(64 * 1024).collect();
        let patterns: [&[Effort]; 5] = [
            &[
                Store, Balanced, Fast, Store, Store, Balanced, Balanced, Fast, Fast, Store,
            ],
            &[Balanced, Store],
            &[Fast, Balanced],
            &[Store],
            &[Balanced],
        ];
        for compressed in ALL {
            for pattern in patterns {
                let efforts = pieces
                    .iter()
                    .enumerate()
                    .map(|(i, piece)| (*piece, pattern[i % pattern.len()]));
                let stream = paced(compressed, &efforts.collect::<Vec<_>>());
                assert!(
                    decoded(compressed, &stream) == content,
                    "{compressed:?} {pattern:?}"
                );
            }
        }
    }

    #[test]
    fn small_pieces_and_empty_ones_at_every_turn_of_effort() {
        use Effort::{Balanced, Fast, Store};
        let content = text(200_000);
        let mut pieces = Vec::new();
        let mut at = 0;
        for (i, len) in [1usize, 2, 3, 0, 100, 5000, 1, 70_000, 0, 17, 40_000, 2]
            .iter()
            .cycle()
            .enumerate()
        {
            if at >= content.len() {
                break;
            }
            let end = (at + len).min(content.len());
            pieces.push((&content[at..end], [Store, Fast, Balanced, Store, Balanced][i % 5]));
            at = end;
        }
        for compressed in ALL {
            assert!(
                decoded(compressed, &paced(compressed, &pieces)) == content,
                "{compressed:?}"
            );
            assert_eq!(
                decoded(compressed, &paced(compressed, &[])),
                b"",
                "{compressed:?} empty"
            );
            assert_eq!(
                decoded(compressed, &paced(compressed, &[(b"", Effort::Balanced)])),
                b"",
                "{compressed:?} one empty piece"
            );
        }
    }

    #[test]
    fn the_effort_shows_in_the_size() {
        let content = text(1 << 20);
        for compressed in ALL {
            let size = |effort| paced(compressed, &[(&content, effort)]).len();
            let (stored, fast, balanced) = (size(Effort::Store), size(Effort::Fast), size(Effort::Balanced));
            assert!(stored > content.len(), "{compressed:?}: stored {stored}");
            assert!(
                stored <= content.len() + content.len() / 1000 + 64,
                "{compressed:?}: stored {stored}"
            );
            assert!(fast * 2 < stored, "{compressed:?}: fast {fast} of {stored}");
            assert!(
                balanced <= fast,
                "{compressed:?}: balanced {balanced}, fast {fast}"
            );
        }
    }
}
