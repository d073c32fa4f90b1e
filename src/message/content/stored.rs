//! Deflate's stored blocks (RFC 1951 §3.2.4) in gzip (RFC 1952) or zlib
//! (RFC 1950) framing: the cheapest valid `gzip` or `deflate` stream, for
//! bytes that do not compress (D9 still asks binary content to travel
//! compressed). Each block is five bytes of framing before up to 65,535
//! bytes as they are; the checksum is all the work.

use flate2::Crc;

use super::encoding::Encoding;

/// The longest stored block.
const BLOCK: usize = u16::MAX as usize;

/// Small writes are gathered into blocks of at least this much, so that
/// content given a few bytes at a time costs no more framing.
const GATHER: usize = 16 * 1024;

/// A gzip member header (RFC 1952 §2.3): deflate, no flags, no time, the
/// operating system unknown; as flate2 writes it.
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// A zlib header (RFC 1950 §2.2): deflate with a 32 KiB window, the
/// fastest level, and the check bits that make it a multiple of 31.
const ZLIB_HEADER: [u8; 2] = [0x78, 0x01];

/// The last block: final, stored, empty.
const LAST_BLOCK: [u8; 5] = [0x01, 0x00, 0x00, 0xff, 0xff];

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
}

impl Stored {
    /// A stream in `encoding`'s framing: `Gzip`, or `Deflate` (zlib).
    pub(super) fn new(encoding: Encoding) -> Stored {
        let check = match encoding {
            Encoding::Gzip => Check::Gzip(Crc::new()),
            _ => Check::Zlib(adler2::Adler32::new()),
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
        }
        if self.pending.len() + bytes.len() < GATHER {
            self.pending.extend_from_slice(bytes);
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        out.reserve(pending.len() + bytes.len() + (pending.len() + bytes.len()).div_ceil(BLOCK) * 5);
        // The held bytes lead the first block (they are fewer than a block).
        let first = bytes.len().min(BLOCK - pending.len());
        block(out, &[&pending, &bytes[..first]]);
        for rest in bytes[first..].chunks(BLOCK) {
            block(out, &[rest]);
        }
        // Its buffer serves the next few small writes.
        self.pending = pending;
        self.pending.clear();
    }

    /// Appends what is held, the last block and the trailer to `out`.
    pub(super) fn finish(mut self, out: &mut Vec<u8>) {
        self.start(out);
        if !self.pending.is_empty() {
            block(out, &[&self.pending]);
        }
        out.extend_from_slice(&LAST_BLOCK);
        match self.check {
            Check::Gzip(crc) => {
                out.extend_from_slice(&crc.sum().to_le_bytes());
                out.extend_from_slice(&crc.amount().to_le_bytes());
            }
            Check::Zlib(adler) => out.extend_from_slice(&adler.checksum().to_be_bytes()),
        }
    }

    fn start(&mut self, out: &mut Vec<u8>) {
        if !self.started {
            self.started = true;
            match self.check {
                Check::Gzip(_) => out.extend_from_slice(&GZIP_HEADER),
                Check::Zlib(_) => out.extend_from_slice(&ZLIB_HEADER),
            }
        }
    }
}

/// Appends one stored block (not the last) holding `parts`, together at
/// most [`BLOCK`] bytes.
fn block(out: &mut Vec<u8>, parts: &[&[u8]]) {
    let len = parts.iter().map(|p| p.len()).sum::<usize>() as u16;
    // Not final, stored; the rest of the byte is padding.
    out.push(0x00);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&(!len).to_le_bytes());
    for part in parts {
        out.extend_from_slice(part);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn stored(encoding: Encoding, pieces: &[&[u8]]) -> Vec<u8> {
        let mut stream = Stored::new(encoding);
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
            flate2::read::GzDecoder::new(&stored(Encoding::Gzip, pieces)[..])
                .read_to_end(&mut back)
                .expect("gzip");
            assert_eq!(back, whole);
            let mut back = Vec::new();
            flate2::read::ZlibDecoder::new(&stored(Encoding::Deflate, pieces)[..])
                .read_to_end(&mut back)
                .expect("zlib");
            assert_eq!(back, whole);
        }
    }

    #[test]
    fn stored_costs_five_bytes_a_block_and_the_framing() {
        let bytes = vec![0xa5; 3 * BLOCK + 1];
        assert_eq!(
            stored(Encoding::Gzip, &[&bytes]).len(),
            bytes.len() + 4 * 5 + 5 + 10 + 8
        );
        assert_eq!(
            stored(Encoding::Deflate, &[&bytes]).len(),
            bytes.len() + 4 * 5 + 5 + 2 + 4
        );
        // Given a hundred bytes at a time, gathered into blocks all the same.
        let pieces: Vec<&[u8]> = bytes.chunks(100).collect();
        let gathered = stored(Encoding::Gzip, &pieces).len() - bytes.len();
        assert!(
            gathered <= bytes.len().div_ceil(GATHER) * 5 + 5 + 18,
            "{gathered} bytes of framing"
        );
    }
}
