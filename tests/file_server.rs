//! The file server behind `jsontp serve`, called as a handler on a fresh
//! temporary folder (issue 4; the contract of the conformance README).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use jsontp::file_server::FileServer;
use jsontp::io_adapters::server::{Handler, RequestInfo};
use jsontp::message::{
    Body, Date, Encoding, Headers, LanguageRange, LanguageTag, MediaType, Method, Request, Response, codec,
};

/// A fresh folder with the conformance fixture's files, removed on drop.
struct Fixture {
    root: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        static N: AtomicUsize = AtomicUsize::new(0);
        let root = std::env::temp_dir().join(format!(
            "jsontp-file-server-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("sub")).expect("fixture folder");
        fs::write(root.join("index.html"), "<h1>hello</h1>\n").expect("write");
        fs::write(root.join("hello.txt"), "Hello, world!").expect("write");
        fs::write(root.join("data.json"), "{\"a\": 1}\n").expect("write");
        fs::write(root.join("sub/page.txt"), "nested").expect("write");
        fs::write(root.join("binary.bin"), (0..=255u8).collect::<Vec<_>>()).expect("write");
        fs::create_dir_all(root.join("empty-folder")).expect("folder");
        let old = fs::File::create(root.join("old.txt")).expect("old.txt");
        std::io::Write::write_all(&mut &old, b"old").expect("write");
        old.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_577_836_800)) // 2020-01-01
            .expect("mtime");
        Fixture { root }
    }

    fn server(&self) -> FileServer {
        FileServer::new(&self.root).expect("serve the fixture")
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

fn info() -> RequestInfo {
    RequestInfo::new("127.0.0.1:1".parse().expect("addr"))
}

fn req(method: Method, resource: &str) -> Request {
    Request::new(method, resource.parse().expect("a valid resource"))
}

fn ask(server: &FileServer, request: Request) -> Response {
    server.handle(&request, &info())
}

fn media(text: &str) -> MediaType {
    text.parse().expect("a valid media type")
}

fn code(response: &Response) -> u16 {
    response.status.code.as_u16()
}

fn text(response: &Response) -> &str {
    response.body.as_text().expect("UTF-8 content")
}

#[test]
fn get_root_serves_index_html_with_its_media_type_and_language() {
    let fixture = Fixture::new();
    let response = ask(&fixture.server(), req(Method::Get, "/"));
    assert_eq!(code(&response), 200);
    assert_eq!(text(&response), "<h1>hello</h1>\n");
    assert_eq!(
        response.headers.content_type().map(|t| t.essence()),
        Some("text/html")
    );
    assert_eq!(response.headers.language(), Some(LanguageTag::EN_US));
}

#[test]
fn get_and_post_return_the_file() {
    let fixture = Fixture::new();
    let server = fixture.server();
    for method in [Method::Get, Method::Post] {
        let request = req(method, "/sub/page.txt").with_body(Body::text("a=1&b=2"));
        let response = ask(&server, request);
        assert_eq!((code(&response), text(&response)), (200, "nested"));
        assert_eq!(
            response.headers.content_type().map(|t| t.essence()),
            Some("text/plain")
        );
    }
    let json = ask(&server, req(Method::Get, "/data.json"));
    assert_eq!(
        json.headers.content_type().map(|t| t.essence()),
        Some("application/json")
    );
}

#[test]
fn missing_files_and_folders_without_index_are_404() {
    let fixture = Fixture::new();
    let server = fixture.server();
    assert_eq!(code(&ask(&server, req(Method::Get, "/nope.txt"))), 404);
    assert_eq!(code(&ask(&server, req(Method::Get, "/empty-folder"))), 404);
    assert_eq!(code(&ask(&server, req(Method::Get, "/sub"))), 404);
    fs::write(fixture.path("sub/index.html"), "sub index").expect("write");
    assert_eq!(text(&ask(&server, req(Method::Get, "/sub"))), "sub index");
}

#[test]
fn put_creates_atomically_then_get_returns_it() {
    let fixture = Fixture::new();
    let server = fixture.server();
    let put = req(Method::Put, "/new.txt").with_body(Body::text("fresh"));
    let response = ask(&server, put);
    assert_eq!(code(&response), 201);
    assert_eq!(
        fs::read_to_string(fixture.path("new.txt")).expect("written"),
        "fresh"
    );
    let replace = req(Method::Put, "/new.txt").with_body(Body::text("replaced"));
    assert_eq!(code(&ask(&server, replace)), 201);
    assert_eq!(text(&ask(&server, req(Method::Get, "/new.txt"))), "replaced");
    // No temporary file is left behind.
    let leftovers: Vec<_> = fs::read_dir(&fixture.root)
        .expect("list")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn put_decoded_binary_content_is_stored_as_bytes() {
    let fixture = Fixture::new();
    let bytes: Vec<u8> = vec![0, 159, 146, 150, 255];
    let body = Body::new(bytes.clone(), Encoding::Gzip).expect("gzip body");
    let response = ask(&fixture.server(), req(Method::Put, "/blob.bin").with_body(body));
    assert_eq!(code(&response), 201);
    assert_eq!(fs::read(fixture.path("blob.bin")).expect("written"), bytes);
}

#[test]
fn put_does_not_create_folders_or_overwrite_one() {
    let fixture = Fixture::new();
    let server = fixture.server();
    let into_missing = req(Method::Put, "/no/such/folder.txt").with_body(Body::text("x"));
    assert_eq!(code(&ask(&server, into_missing)), 404);
    assert!(!fixture.path("no").exists());
    let onto_folder = req(Method::Put, "/sub").with_body(Body::text("x"));
    assert_eq!(code(&ask(&server, onto_folder)), 409);
    assert!(fixture.path("sub").is_dir());
}

#[test]
fn delete_removes_then_404() {
    let fixture = Fixture::new();
    let server = fixture.server();
    let response = ask(&server, req(Method::Delete, "/hello.txt"));
    assert_eq!(code(&response), 204);
    assert!(response.body.content().is_empty(), "D11: 204 has empty content");
    assert!(!fixture.path("hello.txt").exists());
    assert_eq!(code(&ask(&server, req(Method::Delete, "/hello.txt"))), 404);
    assert_eq!(code(&ask(&server, req(Method::Get, "/hello.txt"))), 404);
}

#[test]
fn options_lists_the_five_methods() {
    let fixture = Fixture::new();
    let response = ask(&fixture.server(), req(Method::Options, "/anything"));
    assert_eq!(code(&response), 200);
    let methods = response
        .body
        .extra()
        .get("allowed-methods")
        .expect("allowed-methods");
    assert_eq!(
        methods,
        &serde_json::json!(["GET", "POST", "PUT", "DELETE", "OPTIONS"])
    );
}

#[test]
fn unsupported_content_type_is_415_before_404_and_stores_nothing() {
    // D5: level 5 (415) before level 6 (404).
    let fixture = Fixture::new();
    let server = fixture.server();
    let odd = || Headers::new().with_content_type(media("image/png"));
    let get = req(Method::Get, "/nope.txt").with_headers(odd());
    assert_eq!(code(&ask(&server, get)), 415);
    let put = req(Method::Put, "/ct.txt")
        .with_headers(odd())
        .with_body(Body::text("x"));
    let response = ask(&server, put);
    assert_eq!(code(&response), 415);
    assert!(response.status.human_message.contains("content-type"));
    assert!(!fixture.path("ct.txt").exists());
    let supported = Headers::new().with_content_type(media("text/plain; charset=utf-8"));
    let put = req(Method::Put, "/ct.txt")
        .with_headers(supported)
        .with_body(Body::text("x"));
    assert_eq!(code(&ask(&server, put)), 201);
}

#[test]
fn accept_is_matched_against_the_files_media_type() {
    let fixture = Fixture::new();
    let server = fixture.server();
    let png = Headers::new().with_accept(vec!["image/png".parse().expect("range")]);
    assert_eq!(
        code(&ask(&server, req(Method::Get, "/hello.txt").with_headers(png))),
        415
    );
    let text_any = Headers::new().with_accept(vec![
        "image/png".parse().expect("r"),
        "text/*".parse().expect("r"),
    ]);
    assert_eq!(
        code(&ask(
            &server,
            req(Method::Get, "/hello.txt").with_headers(text_any)
        )),
        200
    );
}

#[test]
fn accept_encoding_compresses_and_412_when_unsatisfiable() {
    let fixture = Fixture::new();
    let server = fixture.server();
    let gzip = Headers::new().with_accept_encoding(vec![Encoding::Deflate, Encoding::Gzip]);
    let response = ask(&server, req(Method::Get, "/hello.txt").with_headers(gzip));
    assert_eq!(
        response.body.encoding(),
        Encoding::Deflate,
        "D8: the client's order"
    );
    assert_eq!(response.body.content(), b"Hello, world!");
    let wire = codec::encode(response.body.content(), Encoding::Deflate);
    assert_eq!(
        codec::decode(&wire, Encoding::Deflate, 1 << 20).expect("decodes"),
        b"Hello, world!"
    );
    let nothing = Headers::new().with_accept_encoding(Vec::new());
    assert_eq!(
        code(&ask(
            &server,
            req(Method::Get, "/hello.txt").with_headers(nothing)
        )),
        412
    );
}

#[test]
fn binary_files_go_out_compressed_or_406() {
    let fixture = Fixture::new();
    let server = fixture.server();
    let plain = ask(&server, req(Method::Get, "/binary.bin"));
    assert_eq!(code(&plain), 406, "identity only cannot carry bytes");
    let identity_first = Headers::new().with_accept_encoding(vec![Encoding::Identity, Encoding::Br]);
    let response = ask(
        &server,
        req(Method::Get, "/binary.bin").with_headers(identity_first),
    );
    assert_eq!(code(&response), 200);
    assert_eq!(response.body.encoding(), Encoding::Br);
    assert_eq!(
        response.body.content(),
        (0..=255u8).collect::<Vec<_>>().as_slice()
    );
    assert_eq!(
        response.headers.content_type().map(|t| t.essence()),
        Some("application/octet-stream")
    );
}

#[test]
fn languages_are_negotiated_406_when_none_offered() {
    // D18.
    let fixture = Fixture::new();
    let fr: LanguageTag = "fr-FR".parse().expect("tag");
    let server = fixture.server().with_languages(vec![LanguageTag::EN_US, fr]);
    let wants_fr = Headers::new().with_accept_language(vec![LanguageRange::Tag(fr)]);
    let response = ask(&server, req(Method::Get, "/hello.txt").with_headers(wants_fr));
    assert_eq!(response.headers.language(), Some(fr));
    let de = LanguageRange::Tag("de-DE".parse().expect("tag"));
    let wants_de = Headers::new().with_accept_language(vec![de]);
    assert_eq!(
        code(&ask(
            &server,
            req(Method::Get, "/hello.txt").with_headers(wants_de)
        )),
        406
    );
    let any = Headers::new().with_accept_language(vec![LanguageRange::Any]);
    let response = ask(&server, req(Method::Get, "/hello.txt").with_headers(any));
    assert_eq!(response.headers.language(), Some(LanguageTag::EN_US));
}

#[test]
fn token_guards_put_and_delete_only() {
    // D14.
    let fixture = Fixture::new();
    let server = fixture.server().with_token(Some("s3cret".into()));
    assert_eq!(code(&ask(&server, req(Method::Get, "/hello.txt"))), 200);
    let put = req(Method::Put, "/t.txt").with_body(Body::text("x"));
    assert_eq!(code(&ask(&server, put.clone())), 401);
    assert!(!fixture.path("t.txt").exists());
    let wrong = Headers::new().with_authorization("guess".to_owned());
    assert_eq!(code(&ask(&server, put.clone().with_headers(wrong))), 401);
    let right = || Headers::new().with_authorization("s3cret".to_owned());
    assert_eq!(code(&ask(&server, put.with_headers(right()))), 201);
    assert_eq!(code(&ask(&server, req(Method::Delete, "/t.txt"))), 401);
    assert_eq!(
        code(&ask(&server, req(Method::Delete, "/t.txt").with_headers(right()))),
        204
    );
    // The 100-continue handshake is refused before the body is sent (D10).
    let first = req(Method::Put, "/t.txt").with_headers(Headers::new().with_expect_continue(true));
    let refused = server
        .check_continue(&first, &info())
        .expect_err("401 before the body");
    assert_eq!(code(&refused), 401);
}

#[test]
fn conditional_requests_follow_d17() {
    let fixture = Fixture::new();
    let server = fixture.server();
    let june_2021 = Date::from_unix_seconds(1_622_505_600);
    let ims = || Headers::new().with_if_modified_since(june_2021);
    let not_modified = ask(&server, req(Method::Get, "/old.txt").with_headers(ims()));
    assert_eq!(code(&not_modified), 304);
    assert!(not_modified.body.content().is_empty());
    assert_eq!(
        text(&ask(&server, req(Method::Get, "/hello.txt").with_headers(ims()))),
        "Hello, world!"
    );
    assert_eq!(
        code(&ask(&server, req(Method::Get, "/nope.txt").with_headers(ims()))),
        412
    );
    let ius = || Headers::new().with_if_unmodified_since(june_2021);
    assert_eq!(
        code(&ask(&server, req(Method::Get, "/old.txt").with_headers(ius()))),
        200
    );
    assert_eq!(
        code(&ask(&server, req(Method::Get, "/hello.txt").with_headers(ius()))),
        412
    );
    // The lost-update guard on PUT and DELETE.
    let put = req(Method::Put, "/hello.txt")
        .with_headers(ius())
        .with_body(Body::text("x"));
    assert_eq!(code(&ask(&server, put)), 412);
    assert_eq!(
        code(&ask(
            &server,
            req(Method::Delete, "/hello.txt").with_headers(ius())
        )),
        412
    );
    assert!(fixture.path("hello.txt").exists());
}

#[cfg(unix)]
#[test]
fn symlinks_leading_out_of_the_root_are_404() {
    // D7: no resource reaches outside the root.
    let fixture = Fixture::new();
    let outside = Fixture::new();
    fs::write(outside.path("secret.txt"), "secret").expect("write");
    std::os::unix::fs::symlink(outside.path("secret.txt"), fixture.path("link.txt")).expect("symlink");
    std::os::unix::fs::symlink(&outside.root, fixture.path("out")).expect("symlink");
    std::os::unix::fs::symlink(fixture.path("hello.txt"), fixture.path("inside.txt")).expect("symlink");
    let server = fixture.server();
    assert_eq!(code(&ask(&server, req(Method::Get, "/link.txt"))), 404);
    assert_eq!(code(&ask(&server, req(Method::Get, "/out/secret.txt"))), 404);
    let put = req(Method::Put, "/out/planted.txt").with_body(Body::text("x"));
    assert_eq!(code(&ask(&server, put)), 404);
    assert!(!outside.path("planted.txt").exists());
    assert_eq!(code(&ask(&server, req(Method::Delete, "/out/secret.txt"))), 404);
    assert!(outside.path("secret.txt").exists());
    assert_eq!(
        text(&ask(&server, req(Method::Get, "/inside.txt"))),
        "Hello, world!"
    );
}

#[test]
fn a_missing_root_is_an_error() {
    let missing = Path::new("/definitely/not/a/folder/jsontp");
    assert!(FileServer::new(missing).is_err());
}
