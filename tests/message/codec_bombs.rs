//! Decompression bombs (D3, D9): a body that inflates to 1 GiB must stop at
//! the decoded-size limit with `TooLarge`, quickly and without holding more
//! than about the limit in memory.
//!
//! Compressing a whole GiB in a debug build takes tens of seconds, so each
//! bomb is built from a repeating unit: the compressor is flushed after every
//! chunk of zeros (a full flush for deflate, which also forgets the history;
//! a Brotli flush, which pads to a byte), and once its output per chunk is
//! the same bytes every time, that unit is repeated. A smaller bomb built the
//! same way is decoded in full, to prove the construction yields a valid
//! stream of exactly the claimed size.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;
use std::sync::Mutex;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use flate2::{Compress, Compression, Crc, FlushCompress};
use jsontp_protocol::message::codec::{DecodeError, decode};
use jsontp_protocol::message::{Encoding, MessageLimits};

/// Counts live heap bytes and remembers the peak, per thread: the other
/// tests of this binary allocate on their own threads meanwhile, and a
/// decode runs on its caller's thread.
struct CountingAllocator;

thread_local! {
    /// Bytes allocated less bytes freed by this thread (memory another
    /// thread allocated and this one frees makes it go down).
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn changed(by: isize) {
    // `try_with`: the allocator also runs while a thread's locals are torn
    // down, when there is nothing left to count in.
    let _ = LIVE.try_with(|live| {
        let now = live.get() + by;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            changed(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            changed(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        changed(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            changed(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// The tests of this file run one at a time, so that two of them do not
/// hold a gigabyte-scale stream each at once.
static SERIAL: Mutex<()> = Mutex::new(());

const MIB: usize = 1024 * 1024;
const GIB: usize = 1024 * MIB;
/// The allowed peak heap growth while decoding a bomb with the 8 MiB limit.
const PEAK_ALLOWED: usize = 64 * MIB;

/// Runs `f` and returns its result with the peak heap growth during it, on
/// this thread.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(base));
    let out = f();
    let peak = PEAK.with(Cell::get) - base;
    (out, usize::try_from(peak).unwrap_or(0))
}

/// A gzip stream (RFC 1952) of `total` zero bytes, `total` a multiple of
/// `chunk`: a 10-byte header, the raw deflate unit repeated, an empty final
/// block, CRC-32 and size.
fn gzip_zeros(total: usize, chunk: usize) -> Vec<u8> {
    let zeros = vec![0u8; chunk];
    let mut deflate = Compress::new(Compression::best(), false);
    let unit = |deflate: &mut Compress| {
        let mut out = Vec::with_capacity(chunk / 100 + 1024);
        deflate
            .compress_vec(&zeros, &mut out, FlushCompress::Full)
            .unwrap();
        assert_eq!(deflate.total_in() as usize % chunk, 0, "whole chunk taken");
        out
    };
    let first = unit(&mut deflate);
    let second = unit(&mut deflate);
    let third = unit(&mut deflate);
    assert_eq!(second, third, "deflate output repeats after a full flush");

    let mut crc = Crc::new();
    let mut chunk_crc = Crc::new();
    chunk_crc.update(&zeros);
    for _ in 0..total / chunk {
        crc.combine(&chunk_crc);
    }

    let mut gz = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    gz.extend_from_slice(&first);
    for _ in 1..total / chunk {
        gz.extend_from_slice(&second);
    }
    // A final fixed-Huffman block holding only end-of-block: bits 1, 01, 0000000.
    gz.extend_from_slice(&[0x03, 0x00]);
    gz.extend_from_slice(&crc.sum().to_le_bytes());
    gz.extend_from_slice(&(total as u32).to_le_bytes());
    gz
}

/// A Brotli stream (RFC 7932) of `total` zero bytes, `total` a multiple of
/// `chunk`, built from the encoder's repeating output per flushed chunk.
fn brotli_zeros(total: usize, chunk: usize) -> Vec<u8> {
    let zeros = vec![0u8; chunk];
    let mut encoder = brotli::CompressorWriter::new(Vec::new(), 4096, 5, 24);
    let mut ends = Vec::new();
    for _ in 0..3 {
        encoder.write_all(&zeros).unwrap();
        encoder.flush().unwrap();
        ends.push(encoder.get_ref().len());
    }
    let three = encoder.into_inner();
    let first = &three[..ends[0]];
    let second = &three[ends[0]..ends[1]];
    let third = &three[ends[1]..ends[2]];
    let closing = &three[ends[2]..];
    assert_eq!(second, third, "brotli output repeats after a flush");

    let mut br = first.to_vec();
    for _ in 1..total / chunk {
        br.extend_from_slice(second);
    }
    br.extend_from_slice(closing);
    br
}

#[test]
fn construction_yields_valid_streams_of_the_claimed_size() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let size = 24 * MIB;
    let gz = STANDARD.encode(gzip_zeros(size, MIB));
    assert_eq!(decode(&gz, Encoding::Gzip, size), Ok(vec![0; size]));
    let br = STANDARD.encode(brotli_zeros(size, 4 * MIB));
    assert_eq!(decode(&br, Encoding::Br, size), Ok(vec![0; size]));
    // The same streams, one byte over a limit.
    assert_eq!(
        decode(&gz, Encoding::Gzip, size - 1),
        Err(DecodeError::TooLarge { limit: size - 1 })
    );
}

#[test]
fn d3_gzip_bomb_of_one_gib_stops_at_the_limit() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let bomb = gzip_zeros(GIB, MIB);
    assert!(bomb.len() < 2 * MIB, "about 1 MB compressed: {}", bomb.len());
    let content = STANDARD.encode(&bomb);
    drop(bomb);
    let limit = MessageLimits::default().max_decoded_body;
    assert_eq!(limit, 8 * MIB);
    let (result, peak) = peak_during(|| decode(&content, Encoding::Gzip, limit));
    assert_eq!(result, Err(DecodeError::TooLarge { limit }));
    assert!(peak < PEAK_ALLOWED, "peak heap {peak} bytes");
}

#[test]
fn d3_brotli_bomb_of_one_gib_stops_at_the_limit() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let bomb = brotli_zeros(GIB, 4 * MIB);
    assert!(bomb.len() < 8 * 1024, "a few KB compressed: {}", bomb.len());
    let content = STANDARD.encode(&bomb);
    let limit = MessageLimits::default().max_decoded_body;
    let (result, peak) = peak_during(|| decode(&content, Encoding::Br, limit));
    assert_eq!(result, Err(DecodeError::TooLarge { limit }));
    assert!(peak < PEAK_ALLOWED, "peak heap {peak} bytes");
}

#[test]
fn d3_allocations_stay_near_the_limit_even_for_small_limits() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let content = STANDARD.encode(gzip_zeros(64 * MIB, MIB));
    let limit = 100_000;
    let (result, peak) = peak_during(|| decode(&content, Encoding::Gzip, limit));
    assert_eq!(result, Err(DecodeError::TooLarge { limit }));
    // The output buffer (at most `limit`), the compressed bytes (~65 KB)
    // and the inflater's own state (~64 KB window and tables).
    assert!(peak < limit + 512 * 1024, "peak heap {peak} bytes");
}
