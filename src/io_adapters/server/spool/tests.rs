//! The spool's tests: content kept in memory or in an anonymous file, the
//! file's life until it is persisted or dropped, the shared budgets on
//! disk (the fair share and eviction) and in memory, and what a refused
//! upload is answered.

use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use super::anonymous::unlinked_file;
use super::error::size;
use super::*;
use crate::message::StatusCode;

fn folder() -> tempfile::TempDir {
    tempfile::tempdir().expect("folder")
}

fn options(folder: &Path) -> SpoolOptions {
    SpoolOptions::default().with_memory_limit(16).with_folder(folder)
}

fn names(folder: &Path) -> Vec<String> {
    std::fs::read_dir(folder)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect()
}

fn content(upload: &Upload) -> Vec<u8> {
    let mut all = Vec::new();
    upload
        .reader()
        .expect("reader")
        .read_to_end(&mut all)
        .expect("read");
    all
}

#[test]
fn small_content_stays_in_memory_and_takes_no_budget() {
    let folder = folder();
    let options = options(folder.path()).with_max_total(0);
    let mut spool = Spool::start(&options);
    spool.push(b"0123456789");
    spool.push(b"abcdef");
    match spool.finish() {
        Ok(Spooled::Memory(bytes, _)) => assert_eq!(bytes, b"0123456789abcdef"),
        other => panic!("{other:?}"),
    }
    assert_eq!(options.spooled_bytes(), 0);
}

#[test]
fn the_portable_anonymous_file_leaves_no_name() {
    use std::io::Write;
    let folder = folder();
    let mut file = unlinked_file(folder.path()).expect("made");
    assert_eq!(names(folder.path()), Vec::<String>::new());
    file.write_all(b"kept by the handle").expect("written");
    file.seek(SeekFrom::Start(0)).expect("rewound");
    let mut back = String::new();
    file.read_to_string(&mut back).expect("read");
    assert_eq!(back, "kept by the handle");
}

#[test]
fn spool_large_content_has_no_name_until_persisted() {
    let folder = folder();
    let options = options(folder.path());
    let mut spool = Spool::start(&options);
    for _ in 0..100 {
        spool.push(b"0123456789");
    }
    assert_eq!(options.spooled_bytes(), 1000);
    // On Linux nothing has a name at any moment; elsewhere the name
    // lasts only while the file is created.
    assert_eq!(names(folder.path()), Vec::<String>::new());
    let Ok(Spooled::File(upload)) = spool.finish() else {
        panic!("spooled to a file")
    };
    assert_eq!(upload.len(), 1000);
    // Two readers, each from the start.
    let mut first = upload.reader().expect("reader");
    let mut head = [0u8; 4];
    first.read_exact(&mut head).expect("read");
    assert_eq!(&head, b"0123");
    assert_eq!(content(&upload), b"0123456789".repeat(100));
    drop(first);
    let target = folder.path().join("kept.txt");
    std::fs::write(&target, "old").expect("old file");
    upload.persist(&target).expect("persist");
    assert_eq!(std::fs::read(&target).expect("kept"), b"0123456789".repeat(100));
    assert_eq!(names(folder.path()), vec!["kept.txt".to_owned()]);
    assert_eq!(options.spooled_bytes(), 0, "the budget is given back");
}

#[test]
fn spool_a_dropped_upload_leaves_nothing_and_gives_its_budget_back() {
    let folder = folder();
    let options = options(folder.path());
    let mut spool = Spool::start(&options);
    spool.push(&[7; 100]);
    let Ok(Spooled::File(upload)) = spool.finish() else {
        panic!("spooled")
    };
    assert_eq!(options.spooled_bytes(), 100);
    drop(upload);
    assert_eq!(options.spooled_bytes(), 0);
    let mut spool = Spool::start(&options);
    spool.push(&[7; 100]);
    drop(spool);
    assert_eq!(options.spooled_bytes(), 0);
    assert!(names(folder.path()).is_empty());
}

#[cfg(unix)]
#[test]
fn spool_persisted_files_get_a_new_files_mode_whatever_their_size() {
    use std::os::unix::fs::PermissionsExt;
    let folder = folder();
    let small = folder.path().join("small");
    std::fs::File::create(&small).expect("create");
    let expected = std::fs::metadata(&small).expect("stat").permissions().mode() & 0o777;
    let mut spool = Spool::start(&options(folder.path()));
    spool.push(&[1; 64]);
    let Ok(Spooled::File(upload)) = spool.finish() else {
        panic!("spooled")
    };
    let large = folder.path().join("large");
    upload.persist(&large).expect("persist");
    let mode = std::fs::metadata(&large).expect("stat").permissions().mode() & 0o777;
    assert_eq!(format!("{mode:o}"), format!("{expected:o}"));
}

/// On Linux, on the spool's file system, the very file is linked into
/// place: the same inode, no copy.
#[cfg(target_os = "linux")]
#[test]
fn spool_persist_on_the_same_file_system_links_without_copying() {
    use std::os::unix::fs::MetadataExt;
    let folder = folder();
    let mut spool = Spool::start(&options(folder.path()));
    spool.push(&[b'y'; 64]);
    let Ok(Spooled::File(upload)) = spool.finish() else {
        panic!("spooled")
    };
    assert!(upload.linkable, "O_TMPFILE in {}", folder.path().display());
    let inode = upload.file.metadata().expect("fstat").ino();
    let target = folder.path().join("t");
    upload.persist(&target).expect("persist");
    assert_eq!(std::fs::metadata(&target).expect("stat").ino(), inode);
    assert_eq!(names(folder.path()), vec!["t".to_owned()]);
}

#[test]
fn spool_persist_copies_to_another_folder_and_replaces_atomically() {
    let (spool_folder, target_folder) = (folder(), folder());
    let mut spool = Spool::start(&options(spool_folder.path()));
    spool.push(&[b'x'; 40]);
    let Ok(Spooled::File(upload)) = spool.finish() else {
        panic!("spooled")
    };
    let target = target_folder.path().join("t.txt");
    std::fs::write(&target, "old").expect("old");
    upload.persist(&target).expect("persist");
    assert_eq!(std::fs::read(&target).expect("read"), vec![b'x'; 40]);
    assert_eq!(names(target_folder.path()), vec!["t.txt".to_owned()]);
}

#[test]
fn spool_persist_into_a_missing_folder_fails_and_leaves_nothing() {
    let folder = folder();
    let options = options(folder.path());
    let mut spool = Spool::start(&options);
    spool.push(&[b'x'; 40]);
    let Ok(Spooled::File(upload)) = spool.finish() else {
        panic!("spooled")
    };
    let error = upload
        .persist(&folder.path().join("missing/t.txt"))
        .expect_err("no such folder");
    assert_eq!(error.kind(), io::ErrorKind::NotFound);
    assert!(names(folder.path()).is_empty());
    assert_eq!(options.spooled_bytes(), 0);
}

#[test]
fn spool_past_the_shared_budget_is_full_and_gives_its_bytes_back() {
    let folder = folder();
    let options = options(folder.path()).with_max_total(100);
    // Two exchanges at once share the budget.
    let mut first = Spool::start(&options);
    let mut second = Spool::start(&options.clone());
    first.push(&[1; 60]);
    assert_eq!(options.spooled_bytes(), 60);
    second.push(&[2; 30]);
    assert_eq!(options.spooled_bytes(), 90);
    // 30 more would be 120, and 60 is past its share of a short budget
    // (50 of 100, two uploads): the second stops storing, and gives its
    // 30 back at once for the others; it goes on counting.
    second.push(&[2; 30]);
    assert_eq!(options.spooled_bytes(), 60);
    second.push(&[2; 5]);
    assert_eq!(second.len, 65);
    let error = second.finish().expect_err("full");
    assert!(matches!(error, SpoolError::Full(_)), "{error:?}");
    assert_eq!(error.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        error.message(),
        "the server's storage for uploads is full: its budget of 100 bytes for all uploads at \
         once is shared by the 2 under way, 50 bytes each, and this content needs 60 bytes; \
         try again later"
    );
    assert_eq!(error.response().status.code, StatusCode::SERVICE_UNAVAILABLE);
    // The first still fits.
    first.push(&[1; 40]);
    let Ok(Spooled::File(upload)) = first.finish() else {
        panic!("spooled")
    };
    assert_eq!(content(&upload), vec![1; 100]);
    assert_eq!(options.spooled_bytes(), 100);
    drop(upload);
    assert_eq!(options.spooled_bytes(), 0);
    // Options made apart have budgets of their own.
    let other = super::tests::options(folder.path()).with_max_total(100);
    let mut third = Spool::start(&other);
    third.push(&[3; 100]);
    assert!(third.finish().is_ok());
}

#[test]
fn spool_memory_moved_to_the_file_counts_against_the_budget() {
    let folder = folder();
    let options = options(folder.path()).with_max_total(20);
    let mut spool = Spool::start(&options);
    spool.push(&[1; 10]);
    // 10 in memory and 11 more: 21 bytes to the file, past 20.
    spool.push(&[1; 11]);
    assert!(matches!(spool.finish(), Err(SpoolError::Full(_))));
    assert_eq!(options.spooled_bytes(), 0);
}

/// Spools of `options`, each given `bytes`, in order.
fn filled(options: &SpoolOptions, sizes: &[usize]) -> Vec<Spool> {
    sizes
        .iter()
        .map(|&bytes| {
            let mut spool = Spool::start(options);
            spool.push(&vec![9; bytes]);
            spool
        })
        .collect()
}

fn spooling(options: &SpoolOptions) -> usize {
    lock(&options.budget.spooling).len()
}

#[test]
fn spool_one_upload_alone_may_take_the_whole_budget() {
    let folder = folder();
    let options = options(folder.path()).with_max_total(100);
    let mut spool = Spool::start(&options);
    for _ in 0..10 {
        spool.push(&[4; 10]);
    }
    let Ok(Spooled::File(upload)) = spool.finish() else {
        panic!("spooled")
    };
    assert_eq!(upload.len(), 100);
    assert_eq!(spooling(&options), 0);
}

#[test]
fn spool_a_newcomer_within_its_share_evicts_the_upload_whose_content_came_longest_ago() {
    let folder = folder();
    let options = options(folder.path()).with_max_total(100);
    // Four uploads hold the whole budget; the first then stores
    // nothing more, the others go on a little.
    let mut held = filled(&options, &[25, 24, 24, 24]);
    for spool in &mut held[1..] {
        spool.push(&[9; 1]);
    }
    assert_eq!(options.spooled_bytes(), 100);
    // A fifth is entitled to 20 (100 among 5): it needs 20, taken back
    // from the first, the one past its share idle the longest.
    let mut newcomer = Spool::start(&options);
    newcomer.push(&[5; 20]);
    assert_eq!(options.spooled_bytes(), 95);
    let mut held = held.into_iter();
    let mut first = held.next().expect("first");
    // Stopped: what comes next is counted only, and the answer is 503.
    first.push(&[9; 10]);
    assert_eq!(first.len, 35);
    assert_eq!(options.spooled_bytes(), 95);
    let error = first.finish().expect_err("evicted");
    assert!(matches!(error, SpoolError::Evicted(_)), "{error:?}");
    assert_eq!(error.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        error.message(),
        "the server's storage for uploads is full, and this upload was stopped to make room \
         for another: it held 25 bytes, more than its share (20 bytes) of the budget of 100 \
         bytes for all uploads at once, shared by the 5 under way; try again later"
    );
    assert_eq!(io::Error::from(error).kind(), io::ErrorKind::StorageFull);
    // The newcomer completes; the others were never touched.
    let Ok(Spooled::File(upload)) = newcomer.finish() else {
        panic!("spooled")
    };
    assert_eq!(content(&upload), vec![5; 20]);
    for spool in held {
        let Ok(Spooled::File(upload)) = spool.finish() else {
            panic!("spooled")
        };
        assert_eq!(upload.len(), 25);
    }
    assert_eq!(spooling(&options), 0);
}

#[test]
fn spool_an_evicted_upload_that_stores_nothing_more_gives_its_file_back_at_once() {
    let folder = folder();
    let options = options(folder.path()).with_max_total(64);
    let held = filled(&options, &[32, 32]);
    let mut newcomer = Spool::start(&options);
    newcomer.push(&[1; 20]);
    // One of the two was evicted: its bytes are back, though its spool
    // never stores again; dropping it later gives nothing back twice.
    assert_eq!(options.spooled_bytes(), 52);
    drop(held);
    assert_eq!(options.spooled_bytes(), 20);
    drop(newcomer);
    assert_eq!(options.spooled_bytes(), 0);
    assert_eq!(spooling(&options), 0);
}

#[test]
fn spool_a_newcomer_past_its_share_evicts_nothing() {
    let folder = folder();
    let options = options(folder.path()).with_max_total(100);
    let held = filled(&options, &[50, 50]);
    // 34 is past a third of 100: refused, and the two keep theirs.
    let mut newcomer = Spool::start(&options);
    newcomer.push(&[1; 34]);
    assert!(matches!(newcomer.finish(), Err(SpoolError::Full(_))));
    assert_eq!(options.spooled_bytes(), 100);
    for spool in held {
        assert!(matches!(spool.finish(), Ok(Spooled::File(_))));
    }
}

#[test]
fn spool_uploads_handed_on_are_not_shared_out() {
    let folder = folder();
    let options = options(folder.path()).with_max_total(100);
    // 60 held by a handler; 40 left for the uploads under way, 20 each
    // for two.
    let Ok(Spooled::File(_kept)) = filled(&options, &[60]).remove(0).finish() else {
        panic!("spooled")
    };
    let held = filled(&options, &[40]);
    let mut newcomer = Spool::start(&options);
    newcomer.push(&[1; 21]);
    assert!(matches!(newcomer.finish(), Err(SpoolError::Full(_))));
    let mut newcomer = Spool::start(&options);
    newcomer.push(&[1; 20]);
    assert!(matches!(newcomer.finish(), Ok(Spooled::File(_))));
    assert!(matches!(
        held.into_iter().next().expect("held").finish(),
        Err(SpoolError::Evicted(_))
    ));
}

#[test]
fn spool_the_budget_holds_under_uploads_from_many_threads() {
    let folder = folder();
    let options = options(folder.path()).with_max_total(4096);
    std::thread::scope(|scope| {
        for thread in 0..8usize {
            let options = options.clone();
            scope.spawn(move || {
                for round in 0..20usize {
                    let mut spool = Spool::start(&options);
                    for piece in 0..(round % 7) {
                        spool.push(&vec![1; 17 + (thread * 31 + piece * 13) % 200]);
                        assert!(options.spooled_bytes() <= 4096);
                    }
                    let _ = spool.finish();
                }
            });
        }
    });
    assert_eq!(options.spooled_bytes(), 0);
    assert_eq!(spooling(&options), 0);
}

#[test]
fn spool_sizes_read_as_a_person_reads_them() {
    assert_eq!(size(900), "900 bytes");
    assert_eq!(size(64 << 20), "64 MiB");
    assert_eq!(size((64 << 20) / 5), "12.8 MiB");
    assert_eq!(size(4 << 30), "4 GiB");
}

#[test]
fn spool_a_folder_that_cannot_hold_the_file_is_an_io_error() {
    let folder = folder();
    let options = options(&folder.path().join("missing"));
    let mut spool = Spool::start(&options);
    spool.push(&[1; 40]);
    let error = spool.finish().expect_err("no folder");
    assert_eq!(error.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert!(error.message().contains("could not store"), "{}", error.message());
    assert_eq!(io::Error::from(error).kind(), io::ErrorKind::NotFound);
    assert_eq!(options.spooled_bytes(), 0);
}

#[test]
fn spool_content_in_memory_counts_against_the_shared_memory_budget_until_dropped() {
    let folder = folder();
    // 16 bytes each in memory, 20 for all at once.
    let options = options(folder.path()).with_max_memory(20);
    let mut first = Spool::start(&options);
    first.push(&[1; 10]);
    let mut second = Spool::start(&options.clone());
    second.push(&[2; 6]);
    second.push(&[2; 4]);
    assert_eq!((options.held_bytes(), options.spooled_bytes()), (20, 0));
    // The budget is in use: the third goes to a file, though small.
    let mut third = Spool::start(&options);
    third.push(&[3; 5]);
    assert_eq!((options.held_bytes(), options.spooled_bytes()), (20, 5));
    let Ok(Spooled::File(upload)) = third.finish() else {
        panic!("spooled to a file")
    };
    assert!(upload.is_small(), "within the memory limit");
    assert_eq!(content(&upload), vec![3; 5]);
    // Finished, the content is still counted until its count is
    // dropped (once its handler has returned).
    let Ok(Spooled::Memory(bytes, held)) = first.finish() else {
        panic!("in memory")
    };
    assert_eq!(bytes, vec![1; 10]);
    assert_eq!(options.held_bytes(), 20);
    drop(held);
    assert_eq!(options.held_bytes(), 10);
    // A spool that moves to a file gives its memory back at once.
    second.push(&[2; 7]);
    assert_eq!((options.held_bytes(), options.spooled_bytes()), (0, 5 + 17));
    let Ok(Spooled::File(large)) = second.finish() else {
        panic!("spooled to a file")
    };
    assert!(!large.is_small(), "past the memory limit");
    drop((upload, large));
    assert_eq!((options.held_bytes(), options.spooled_bytes()), (0, 0));
    // One dropped unfinished gives its memory back too.
    let mut fourth = Spool::start(&options);
    fourth.push(&[4; 16]);
    assert_eq!(options.held_bytes(), 16);
    drop(fourth);
    assert_eq!(options.held_bytes(), 0);
}

#[test]
fn spool_small_content_past_both_budgets_is_refused_naming_both() {
    let folder = folder();
    let options = options(folder.path()).with_max_memory(10).with_max_total(5);
    let mut first = Spool::start(&options);
    first.push(&[1; 8]);
    let mut second = Spool::start(&options);
    second.push(&[2; 8]);
    let error = second.finish().expect_err("no room");
    assert_eq!(error.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        error.message(),
        "the server's memory for request content is in use (its budget of 10 bytes for all \
         requests at once), and the server's storage for uploads is full: its budget of 5 \
         bytes for all uploads at once is shared by the 1 under way, 5 bytes each, and this \
         content needs 8 bytes; try again later"
    );
    assert_eq!((options.held_bytes(), options.spooled_bytes()), (8, 0));
    assert!(matches!(first.finish(), Ok(Spooled::Memory(..))));
    assert_eq!(options.held_bytes(), 0);
}

#[test]
fn spool_options_compare_settings_not_the_bytes_spooled() {
    let a = SpoolOptions::default();
    let b = SpoolOptions::default();
    let mut spool = Spool::start(&a.clone().with_memory_limit(0));
    spool.push(b"x");
    assert_eq!(a.spooled_bytes(), 1);
    assert_eq!(a, b);
    assert_ne!(a, b.clone().with_max_total(1));
    assert_ne!(a, b.with_max_memory(1));
}
