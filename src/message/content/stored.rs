//! Content as it is, in a compressed encoding's framing: the cheapest
//! valid `gzip`, `deflate` or `br` stream, for bytes that do not compress
//! (D9 still asks binary content to travel compressed).
//!
//! - gzip (RFC 1952) and zlib (RFC 1950): deflate's stored blocks (RFC 1951
//!   §3.2.4), five bytes of framing before up to 65,535 bytes; the
//!   checksum is all the work.
//! - Brotli (RFC 7932): uncompressed meta-blocks (§9.2), three bytes of
//!   framing before up to 65,535 bytes, and no checksum.

use flate2::Crc;

use super::encoding::Compressed;

/// The longest stored block.
pub(super) const BLOCK: usize = u16::MAX as usize;

/// Small writes are gathered into blocks of at least this much, so that
/// content given a few bytes at a time costs no more framing.
pub(super) const GATHER: usize = 16 * 1024;

/// A gzip member header (RFC 1952 §2.3): deflate, no flags, no time, the
/// operating system unknown; as flate2 writes it.
pub(super) const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// A zlib header (RFC 1950 §2.2): deflate with a 32 KiB window, the
/// fastest level, and the check bits that make it a multiple of 31.
pub(super) const ZLIB_HEADER: [u8; 2] = [0x78, 0x01];

/// The last block: final, stored, empty.
pub(super) const LAST_BLOCK: [u8; 5] = [0x01, 0x00, 0x00, 0xff, 0xff];

/// A Brotli stream's first byte, from the lowest bit: a window of 16 bits
/// (`0`), then an empty metadata meta-block (not last `0`, `MNIBBLES` 0
/// `11`, reserved `0`, no length bytes `00`) and a zero bit of padding:
/// every meta-block after it starts on a byte.
const BROTLI_HEADER: [u8; 1] = [0x0c];

/// A Brotli stream's end: a last, empty meta-block (`ISLAST` and
/// `ISLASTEMPTY`), padded.
pub(super) const BROTLI_LAST: [u8; 1] = [0x03];

/// A stream of stored blocks, written as content comes.
pub(super) struct Stored {
    check: Check,
    /// Bytes not yet in a block: fewer than [`GATHER`].
    pending: Vec<u8>,
    /// The header is written with the first output.
    started: bool,
}

enum Check {
    /// gzip: CRC-32 and the length, kept by flate2's `Crc`.
    Gzip(Crc),
    /// zlib: Adler-32.
    Zlib(adler2::Adler32),
    /// Brotli: none.
    Brotli,
}

impl Stored {
    /// A stream in the framing of `compressed`: gzip, zlib (`deflate`) or
    /// Brotli.
    pub(super) fn new(compressed: Compressed) -> Stored {
        let check = match compressed {
            Compressed::Gzip => Check::Gzip(Crc::new()),
            Compressed::Deflate => Check::Zlib(adler2::Adler32::new()),
            Compressed::Br => Check::Brotli,
        };
        Stored {
            check,
            pending: Vec::new(),
            started: false,
        }
    }

    /// Appends `bytes` to `out` as stored blocks, or holds them until
    /// [`GATHER`] bytes have come.
    pub(super) fn write(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        self.start(out);
        match &mut self.check {
            Check::Gzip(crc) => crc.update(bytes),
            Check::Zlib(adler) => adler.write_slice(bytes),
            Check::Brotli => {}
        }
        if self.pending.len() + bytes.len() < GATHER {
            self.pending.extend_from_slice(bytes);
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        out.reserve(pending.len() + bytes.len() + (pending.len() + bytes.len()).div_ceil(BLOCK) * 5);
        // The held bytes lead the first block (they are fewer than a block).
        let first = bytes.len().min(BLOCK - pending.len());
        self.block(out, &[&pending, &bytes[..first]]);
        for rest in bytes[first..].chunks(BLOCK) {
            self.block(out, &[rest]);
        }
        // Its buffer serves the next few small writes.
        self.pending = pending;
        self.pending.clear();
    }

    /// Appends what is held, the last block and the trailer to `out`.
    pub(super) fn finish(mut self, out: &mut Vec<u8>) {
        self.start(out);
        if !self.pending.is_empty() {
            self.block(out, &[&self.pending]);
        }
        match self.check {
            Check::Gzip(crc) => {
                out.extend_from_slice(&LAST_BLOCK);
                out.extend_from_slice(&crc.sum().to_le_bytes());
                out.extend_from_slice(&crc.amount().to_le_bytes());
            }
            Check::Zlib(adler) => {
                out.extend_from_slice(&LAST_BLOCK);
                out.extend_from_slice(&adler.checksum().to_be_bytes());
            }
            Check::Brotli => out.extend_from_slice(&BROTLI_LAST),
        }
    }

    fn start(&mut self, out: &mut Vec<u8>) {
        if !self.started {
            self.started = true;
            match self.check {
                Check::Gzip(_) => out.extend_from_slice(&GZIP_HEADER),
                Check::Zlib(_) => out.extend_from_slice(&ZLIB_HEADER),
                Check::Brotli => out.extend_from_slice(&BROTLI_HEADER),
            }
        }
    }

    /// Appends one block (not the last) holding `parts`, together at
    /// most [`BLOCK`] bytes and at least one.
    fn block(&self, out: &mut Vec<u8>, parts: &[&[u8]]) {
        let len = parts.iter().map(|p| p.len()).sum::<usize>();
        debug_assert!((1..=BLOCK).contains(&len));
        match self.check {
            Check::Gzip(_) | Check::Zlib(_) => {
                let len = len as u16;
                // Not final, stored; the rest of the byte is padding.
                out.push(0x00);
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(&(!len).to_le_bytes());
            }
            Check::Brotli => {
                // From the lowest bit: not last, four nibbles of length
                // (`MNIBBLES` 0), the length less one, uncompressed, and
                // padding to the byte.
                let header = ((len as u32 - 1) << 3) | 1 << 19;
                out.extend_from_slice(&header.to_le_bytes()[..3]);
            }
        }
        for part in parts {
            out.extend_from_slice(part);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn stored(compressed: Compressed, pieces: &[&[u8]]) -> Vec<u8> {
        let mut stream = Stored::new(compressed);
        let mut out = Vec::new();
        for piece in pieces {
            stream.write(piece, &mut out);
        }
        stream.finish(&mut out);
        out
    }

    #[test]
    fn stored_streams_are_what_flate2_reads() {
        let big: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + i / 300) as u8).collect();
        let small: Vec<&[u8]> = big[..50_000].chunks(100).collect();
        let cases: [&[&[u8]]; 5] = [
            &[],
            &[b""],
            &[b"hello"],
            &[&big[..70_000], b"", &big[70_000..]],
            &small,
        ];
        for pieces in cases {
            let whole: Vec<u8> = pieces.concat();
            let mut back = Vec::new();
            flate2::read::GzDecoder::new(&stored(Compressed::Gzip, pieces)[..])
                .read_to_end(&mut back)
                .expect("gzip");
            assert_eq!(back, whole);
            let mut back = Vec::new();
            flate2::read::ZlibDecoder::new(&stored(Compressed::Deflate, pieces)[..])
                .read_to_end(&mut back)
                .expect("zlib");
            assert_eq!(back, whole);
            let br = stored(Compressed::Br, pieces);
            assert_eq!(
                crate::message::codec::decode(
                    &super::super::base64::encode(&br),
                    crate::message::Encoding::Br,
                    1 << 20
                ),
                Ok(whole.clone()),
                "br, {} pieces",
                pieces.len()
            );
            let mut back = Vec::new();
            brotli::Decompressor::new(&br[..], 4096)
                .read_to_end(&mut back)
                .expect("brotli");
            assert_eq!(back, whole);
        }
    }

    #[test]
    fn stored_costs_five_bytes_a_block_and_the_framing() {
        let bytes = vec![0xa5; 3 * BLOCK + 1];
        assert_eq!(
            stored(Compressed::Gzip, &[&bytes]).len(),
            bytes.len() + 4 * 5 + 5 + 10 + 8
        );
        assert_eq!(
            stored(Compressed::Deflate, &[&bytes]).len(),
            bytes.len() + 4 * 5 + 5 + 2 + 4
        );
        assert_eq!(
            stored(Compressed::Br, &[&bytes]).len(),
            bytes.len() + 4 * 3 + 1 + 1
        );
        // Given a hundred bytes at a time, gathered into blocks all the same.
        let pieces: Vec<&[u8]> = bytes.chunks(100).collect();
        let gathered = stored(Compressed::Gzip, &pieces).len() - bytes.len();
        assert!(
            gathered <= bytes.len().div_ceil(GATHER) * 5 + 5 + 18,
            "{gathered} bytes of framing"
        );
    }
}
