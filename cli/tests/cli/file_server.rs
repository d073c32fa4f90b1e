//! The file server behind `jsontp serve`, called as a handler on a fresh
//! temporary folder holding the files of a small site (D5, D8, D11, D17).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use jsontp_cli::file_server::FileServer;
use jsontp_protocol::app::Router;
use jsontp_protocol::io_adapters::server::{Handler, Incoming, RequestInfo};
use jsontp_protocol::message::{
    Body, Date, Encoding, EncodingRange, Headers, LanguageRange, LanguageTag, MediaRange, MediaType,
    MessageLimits, Method, Request, Response, Validation, Weight, Weighted, codec, parse_response,
};

/// A fresh folder holding a small site's files, removed on drop.
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

/// The server's answer, whole (a streamed file read into memory), from
/// the file server's router as `jsontp serve` serves it.
fn ask(server: &Router, request: Request) -> Response {
    let (mut response, reader) = server.respond(Incoming::new(request, info())).wait().into_parts();
    if let Some(mut reader) = reader {
        let mut content = Vec::new();
        std::io::Read::read_to_end(&mut reader, &mut content).expect("the file reads");
        response.body =
            jsontp_protocol::message::Body::new(content, response.body.encoding()).expect("a body");
    }
    response
}

fn media(text: &str) -> MediaType {
    text.parse().expect("a valid media type")
}

fn ranges(items: &[&str]) -> Vec<Weighted<MediaRange>> {
    items
        .iter()
        .map(|s| s.parse().expect("an accept entry"))
        .collect()
}

fn encodings(items: &[&str]) -> Vec<Weighted<EncodingRange>> {
    items
        .iter()
        .map(|s| s.parse().expect("an accept-encoding entry"))
        .collect()
}

fn allowed(response: &Response) -> serde_json::Value {
    response
        .body
        .extra()
        .get("allowed-methods")
        .cloned()
        .expect("allowed-methods")
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
    let response = ask(&fixture.server().into_router(), req(Method::Get, "/"));
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
    let server = fixture.server().into_router();
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
fn d7_resources_are_decoded_before_lookup() {
    let fixture = Fixture::new();
    let server = fixture.server().into_router();
    for resource in [
        "/sub%2Fpage.txt",
        "/sub%2fpage.txt",
        "sub/page.txt#frag",
        "JSONTP://localhost:8080/sub/page.txt",
        "/sub/%2E/page.txt",
        "/sub/x/%2E%2E/page.txt",
    ] {
        assert_eq!(
            text(&ask(&server, req(Method::Get, resource))),
            "nested",
            "{resource}"
        );
    }
    fs::write(fixture.path("caf\u{e9} \u{a0}.txt"), "accents").expect("write");
    assert_eq!(
        text(&ask(&server, req(Method::Get, "/caf%C3%A9%20%C2%A0.txt"))),
        "accents"
    );
    assert_eq!(
        text(&ask(&server, req(Method::Get, "/caf\u{e9}%20\u{a0}.txt"))),
        "accents"
    );
    assert_eq!(
        text(&ask(&server, req(Method::Get, "jsontp://localhost"))),
        "<h1>hello</h1>\n"
    );
}

#[test]
fn missing_files_and_folders_without_index_are_404() {
    let fixture = Fixture::new();
    let server = fixture.server().into_router();
    assert_eq!(code(&ask(&server, req(Method::Get, "/nope.txt"))), 404);
    assert_eq!(code(&ask(&server, req(Method::Get, "/empty-folder"))), 404);
    assert_eq!(code(&ask(&server, req(Method::Get, "/sub"))), 404);
    fs::write(fixture.path("sub/index.html"), "sub index").expect("write");
    assert_eq!(text(&ask(&server, req(Method::Get, "/sub"))), "sub index");
}

#[test]
fn put_creates_atomically_then_get_returns_it() {
    let fixture = Fixture::new();
    let server = fixture.server().into_router();
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
    let response = ask(
        &fixture.server().into_router(),
        req(Method::Put, "/blob.bin").with_body(body),
    );
    assert_eq!(code(&response), 201);
    assert_eq!(fs::read(fixture.path("blob.bin")).expect("written"), bytes);
}

#[test]
fn put_does_not_create_folders_or_overwrite_one() {
    let fixture = Fixture::new();
    let server = fixture.server().into_router();
    let into_missing = req(Method::Put, "/no/such/folder.txt").with_body(Body::text("x"));
    assert_eq!(code(&ask(&server, into_missing)), 404);
    assert!(!fixture.path("no").exists());
    for folder in ["/sub", "/sub/", "/", "/empty-folder"] {
        let onto_folder = req(Method::Put, folder).with_body(Body::text("x"));
        assert_eq!(code(&ask(&server, onto_folder)), 409, "D11: PUT of {folder}");
        let delete = ask(&server, req(Method::Delete, folder));
        assert_eq!(code(&delete), 409, "D11: DELETE of {folder}");
        assert!(delete.status.human_message.contains("folder"));
    }
    assert!(fixture.path("sub").is_dir());
    assert!(fixture.path("empty-folder").is_dir());
}

#[test]
fn delete_removes_then_404() {
    let fixture = Fixture::new();
    let server = fixture.server().into_router();
    let response = ask(&server, req(Method::Delete, "/hello.txt"));
    assert_eq!(code(&response), 204);
    assert!(response.body.content().is_empty(), "D11: 204 has empty content");
    assert!(!fixture.path("hello.txt").exists());
    assert_eq!(code(&ask(&server, req(Method::Delete, "/hello.txt"))), 404);
    assert_eq!(code(&ask(&server, req(Method::Get, "/hello.txt"))), 404);
}

#[test]
fn d11_options_is_never_404() {
    let fixture = Fixture::new();
    let server = fixture.server().into_router();
    let five = serde_json::json!(["GET", "POST", "PUT", "DELETE", "OPTIONS"]);
    for existing in ["/hello.txt", "/sub/page.txt"] {
        let response = ask(&server, req(Method::Options, existing));
        assert_eq!(code(&response), 200, "{existing}");
        assert_eq!(allowed(&response), five, "{existing}");
    }
    // A folder: PUT and DELETE of it are 409, so not offered.
    for folder in ["/", "/sub", "/empty-folder"] {
        let response = ask(&server, req(Method::Options, folder));
        assert_eq!(code(&response), 200, "{folder}");
        assert_eq!(
            allowed(&response),
            serde_json::json!(["GET", "POST", "OPTIONS"]),
            "{folder}"
        );
        assert_eq!(code(&ask(&server, req(Method::Delete, folder))), 409, "{folder}");
    }
    // A missing file lists what could be done there: create it.
    let missing = ask(&server, req(Method::Options, "/anything"));
    assert_eq!(code(&missing), 200);
    assert_eq!(allowed(&missing), serde_json::json!(["PUT", "OPTIONS"]));
    // In a folder that does not exist, not even PUT (it creates no folders).
    let nowhere = ask(&server, req(Method::Options, "/no/such/file.txt"));
    assert_eq!(code(&nowhere), 200);
    assert_eq!(allowed(&nowhere), serde_json::json!(["OPTIONS"]));
    // Conditional headers do not apply to OPTIONS (D17).
    let ius = Headers::new().with_if_unmodified_since(Date::from_unix_seconds(0));
    assert_eq!(
        code(&ask(&server, req(Method::Options, "/anything").with_headers(ius))),
        200
    );
}

#[test]
fn d11_a_read_only_server_lists_and_refuses_writes() {
    let fixture = Fixture::new();
    let server = fixture.server().with_writes(false).into_router();
    let existing = ask(&server, req(Method::Options, "/hello.txt"));
    assert_eq!(allowed(&existing), serde_json::json!(["GET", "POST", "OPTIONS"]));
    let missing = ask(&server, req(Method::Options, "/anything"));
    assert_eq!(allowed(&missing), serde_json::json!(["OPTIONS"]));
    let put = ask(&server, req(Method::Put, "/new.txt").with_body(Body::text("x")));
    assert_eq!(code(&put), 405);
    assert_eq!(allowed(&put), serde_json::json!(["OPTIONS"]));
    assert!(!fixture.path("new.txt").exists());
    let delete = ask(&server, req(Method::Delete, "/hello.txt"));
    assert_eq!(code(&delete), 405);
    assert_eq!(allowed(&delete), serde_json::json!(["GET", "POST", "OPTIONS"]));
    assert!(fixture.path("hello.txt").exists());
    assert_eq!(code(&ask(&server, req(Method::Get, "/hello.txt"))), 200);
}

#[test]
fn unsupported_content_type_is_415_before_404_and_stores_nothing() {
    // D5: level 5 (415) before level 6 (404).
    let fixture = Fixture::new();
    let server = fixture.server().into_router();
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
    let server = fixture.server().into_router();
    let png = Headers::new().with_accept(ranges(&["image/png"]));
    assert_eq!(
        code(&ask(&server, req(Method::Get, "/hello.txt").with_headers(png))),
        415
    );
    let text_any = Headers::new().with_accept(ranges(&["image/png", "text/*"]));
    assert_eq!(
        code(&ask(
            &server,
            req(Method::Get, "/hello.txt").with_headers(text_any)
        )),
        200
    );
    // q=0 on the most specific range excludes the type (D8).
    let not_plain = Headers::new().with_accept(ranges(&["*/*", "text/plain;q=0"]));
    assert_eq!(
        code(&ask(
            &server,
            req(Method::Get, "/hello.txt").with_headers(not_plain.clone())
        )),
        415
    );
    assert_eq!(
        code(&ask(
            &server,
            req(Method::Get, "/data.json").with_headers(not_plain)
        )),
        200
    );
}

#[test]
fn accept_encoding_compresses_and_412_when_unsatisfiable() {
    let fixture = Fixture::new();
    let server = fixture.server().into_router();
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
    let unknown_only = Headers::new().with_accept_encoding(encodings(&["*;q=0"]));
    let refused = ask(&server, req(Method::Get, "/hello.txt").with_headers(unknown_only));
    assert_eq!(code(&refused), 412);
    assert!(refused.status.human_message.contains("accept-encoding"));
    // Weights decide before the order (D8).
    let weighted =
        Headers::new().with_accept_encoding(encodings(&["gzip;q=0.2", "br;q=0.9", "identity;q=0.5"]));
    let response = ask(&server, req(Method::Get, "/hello.txt").with_headers(weighted));
    assert_eq!(response.body.encoding(), Encoding::Br);
}

#[test]
fn d8_binary_files_go_out_compressed_or_412() {
    let fixture = Fixture::new();
    let server = fixture.server().into_router();
    let bytes: Vec<u8> = (0..=255u8).collect();
    // No accept-encoding accepts every encoding: the server picks gzip.
    let plain = ask(&server, req(Method::Get, "/binary.bin"));
    assert_eq!(code(&plain), 200);
    assert_eq!(plain.body.encoding(), Encoding::Gzip);
    assert_eq!(plain.body.content(), bytes.as_slice());
    let wire = codec::encode(plain.body.content(), Encoding::Gzip);
    assert_eq!(
        codec::decode(&wire, Encoding::Gzip, 1 << 20).expect("gzip"),
        bytes
    );
    // An empty list is the same as none (D8).
    let empty = Headers::new().with_accept_encoding(Vec::<Encoding>::new());
    let response = ask(&server, req(Method::Get, "/binary.bin").with_headers(empty));
    assert_eq!((code(&response), response.body.encoding()), (200, Encoding::Gzip));
    // identity alone cannot carry bytes: 412, never 406 (D8, D18).
    for only_identity in [&["identity"][..], &["identity", "gzip;q=0", "deflate;q=0"]] {
        let headers = Headers::new().with_accept_encoding(encodings(only_identity));
        let refused = ask(&server, req(Method::Get, "/binary.bin").with_headers(headers));
        assert_eq!(code(&refused), 412, "{only_identity:?}");
        assert!(refused.status.human_message.contains("not UTF-8"));
    }
    // Text still goes out as identity with the same header.
    let identity = Headers::new().with_accept_encoding([Encoding::Identity]);
    assert_eq!(
        code(&ask(
            &server,
            req(Method::Get, "/hello.txt").with_headers(identity)
        )),
        200
    );
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
    let server = fixture
        .server()
        .with_languages(vec![LanguageTag::EN_US, fr])
        .into_router();
    let wants_fr = Headers::new().with_accept_language([fr]);
    let response = ask(&server, req(Method::Get, "/hello.txt").with_headers(wants_fr));
    assert_eq!(response.headers.language(), Some(fr));
    let de = LanguageRange::Tag("de-DE".parse().expect("tag"));
    let wants_de = Headers::new().with_accept_language([de]);
    assert_eq!(
        code(&ask(
            &server,
            req(Method::Get, "/hello.txt").with_headers(wants_de)
        )),
        406
    );
    let any = Headers::new().with_accept_language([LanguageRange::Any]);
    let response = ask(&server, req(Method::Get, "/hello.txt").with_headers(any));
    assert_eq!(response.headers.language(), Some(LanguageTag::EN_US));
    // Weights (D8): en-US at 0.8, fr-FR at 1.
    let weighted = Headers::new().with_accept_language([
        Weighted::from(LanguageTag::EN_US).with_weight(Weight::from_thousandths(800).expect("0.8")),
        Weighted::from(fr),
    ]);
    let response = ask(&server, req(Method::Get, "/hello.txt").with_headers(weighted));
    assert_eq!(response.headers.language(), Some(fr));
    // The negotiated language is on refusals too.
    let wants_fr = Headers::new().with_accept_language([fr]);
    let missing = ask(&server, req(Method::Get, "/nope.txt").with_headers(wants_fr));
    assert_eq!((code(&missing), missing.headers.language()), (404, Some(fr)));
}

#[test]
fn token_guards_put_and_delete_only() {
    // D14.
    let fixture = Fixture::new();
    let server = fixture.server().with_token(Some("s3cret".into())).into_router();
    assert_eq!(code(&ask(&server, req(Method::Get, "/hello.txt"))), 200);
    let put = req(Method::Put, "/t.txt").with_body(Body::text("x"));
    assert_eq!(code(&ask(&server, put.clone())), 401);
    assert!(!fixture.path("t.txt").exists());
    // A guess, a prefix of the token, the token extended, another case.
    for guess in ["guess", "s3cre", "s3cret!", "S3CRET", ""] {
        let wrong = Headers::new().with_authorization(guess.to_owned());
        assert_eq!(
            code(&ask(&server, put.clone().with_headers(wrong))),
            401,
            "{guess:?}"
        );
    }
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
        .check_head(&first, &info())
        .refusal()
        .expect("401 before the body");
    assert_eq!(code(&refused), 401);
}

#[test]
fn conditional_requests_follow_d17() {
    let fixture = Fixture::new();
    let server = fixture.server().into_router();
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
    // The guard holds on an unmodified file.
    let delete = req(Method::Delete, "/old.txt").with_headers(ius());
    assert_eq!(code(&ask(&server, delete)), 204);
}

#[test]
fn d17_if_unmodified_since_on_a_missing_resource_is_412_before_404() {
    let fixture = Fixture::new();
    let server = fixture.server().into_router();
    let ius = || Headers::new().with_if_unmodified_since(Date::from_unix_seconds(1_622_505_600));
    let delete = ask(
        &server,
        req(Method::Delete, "/never-there.txt").with_headers(ius()),
    );
    assert_eq!(code(&delete), 412);
    assert!(delete.status.human_message.contains("if-unmodified-since"));
    assert_eq!(code(&ask(&server, req(Method::Delete, "/never-there.txt"))), 404);
    // PUT creating a file: the condition cannot hold, nothing is written.
    let put = req(Method::Put, "/created.txt")
        .with_headers(ius())
        .with_body(Body::text("x"));
    assert_eq!(code(&ask(&server, put)), 412);
    assert!(!fixture.path("created.txt").exists());
    let put = req(Method::Put, "/no/such/folder.txt")
        .with_headers(ius())
        .with_body(Body::text("x"));
    assert_eq!(code(&ask(&server, put)), 412);
    for method in [Method::Get, Method::Post] {
        let get = ask(&server, req(method, "/nope.txt").with_headers(ius()));
        assert_eq!(code(&get), 412, "{method}");
    }
}

#[test]
fn d17_if_modified_since_applies_to_get_and_post_only() {
    let fixture = Fixture::new();
    let server = fixture.server().into_router();
    let ims = || Headers::new().with_if_modified_since(Date::from_unix_seconds(1_622_505_600));
    for method in [Method::Get, Method::Post] {
        assert_eq!(
            code(&ask(&server, req(method, "/old.txt").with_headers(ims()))),
            304,
            "{method}"
        );
    }
    // Ignored on PUT and DELETE: neither 304 nor 412.
    let put = req(Method::Put, "/old.txt")
        .with_headers(ims())
        .with_body(Body::text("replaced"));
    assert_eq!(code(&ask(&server, put)), 201);
    let put_new = req(Method::Put, "/fresh.txt")
        .with_headers(ims())
        .with_body(Body::text("new"));
    assert_eq!(code(&ask(&server, put_new)), 201);
    let delete = ask(&server, req(Method::Delete, "/fresh.txt").with_headers(ims()));
    assert_eq!(code(&delete), 204);
    let delete_missing = ask(&server, req(Method::Delete, "/fresh.txt").with_headers(ims()));
    assert_eq!(code(&delete_missing), 404);
}

#[test]
fn d17_both_headers_if_unmodified_since_first() {
    let fixture = Fixture::new();
    let server = fixture.server().into_router();
    let far_future = Date::from_unix_seconds(4_102_444_800); // 2100
    let june_2021 = Date::from_unix_seconds(1_622_505_600);
    // hello.txt was modified after june 2021 (412) and not after 2100 (304): 412 wins.
    let both = Headers::new()
        .with_if_modified_since(far_future)
        .with_if_unmodified_since(june_2021);
    assert_eq!(
        code(&ask(&server, req(Method::Get, "/hello.txt").with_headers(both))),
        412
    );
    // old.txt holds the guard; then if-modified-since gives 304.
    let both = Headers::new()
        .with_if_modified_since(far_future)
        .with_if_unmodified_since(june_2021);
    assert_eq!(
        code(&ask(&server, req(Method::Get, "/old.txt").with_headers(both))),
        304
    );
}

#[test]
fn d5_415_before_412_before_406_before_level_6() {
    let fixture = Fixture::new();
    let server = fixture
        .server()
        .with_token(Some("s3cret".into()))
        .with_writes(true)
        .into_router();
    let bad_type = || media("image/png");
    let no_encoding = || encodings(&["*;q=0"]);
    let de = || LanguageRange::Tag("de-DE".parse().expect("tag"));
    let all = Headers::new()
        .with_content_type(bad_type())
        .with_accept_encoding(no_encoding())
        .with_accept_language([de()]);
    assert_eq!(
        code(&ask(&server, req(Method::Get, "/nope.txt").with_headers(all))),
        415
    );
    let no_type = Headers::new()
        .with_accept_encoding(no_encoding())
        .with_accept_language([de()]);
    assert_eq!(
        code(&ask(&server, req(Method::Get, "/nope.txt").with_headers(no_type))),
        412
    );
    // The content-dependent 412 (bytes, identity only) still comes before 406.
    let binary = Headers::new()
        .with_accept_encoding([Encoding::Identity])
        .with_accept_language([de()]);
    assert_eq!(
        code(&ask(
            &server,
            req(Method::Get, "/binary.bin").with_headers(binary)
        )),
        412
    );
    let language_only = || Headers::new().with_accept_language([de()]);
    assert_eq!(
        code(&ask(
            &server,
            req(Method::Get, "/nope.txt").with_headers(language_only())
        )),
        406
    );
    // Level 5 before the token (401), the token before the folder (409).
    let put = req(Method::Put, "/sub").with_body(Body::text("x"));
    assert_eq!(
        code(&ask(&server, put.clone().with_headers(language_only()))),
        406
    );
    assert_eq!(code(&ask(&server, put.clone())), 401);
    let token = Headers::new().with_authorization("s3cret".to_owned());
    assert_eq!(code(&ask(&server, put.with_headers(token))), 409);
    // A read-only server: 401 before 405.
    let read_only = fixture
        .server()
        .with_token(Some("s3cret".into()))
        .with_writes(false)
        .into_router();
    let delete = req(Method::Delete, "/hello.txt");
    assert_eq!(code(&ask(&read_only, delete.clone())), 401);
    let token = Headers::new().with_authorization("s3cret".to_owned());
    assert_eq!(code(&ask(&read_only, delete.with_headers(token))), 405);
}

#[test]
fn d19_only_a_put_takes_its_content_the_others_drop_it_unstored() {
    use jsontp_protocol::io_adapters::server::HeadCheck;
    let fixture = Fixture::new();
    let server = fixture.server().into_router();
    for (method, wanted) in [
        (Method::Put, true),
        (Method::Get, false),
        (Method::Post, false),
        (Method::Delete, false),
        (Method::Options, false),
    ] {
        let head = req(method, "/hello.txt");
        match server.check_head(&head, &info()) {
            HeadCheck::Wanted => assert!(wanted, "{method} wants no content"),
            HeadCheck::Unwanted => assert!(!wanted, "{method} takes its content"),
            HeadCheck::Refused(answer) => panic!("{method}: {answer:?}"),
            other => panic!("{method}: {other:?}"),
        }
    }
}

#[test]
fn d10_the_handshake_is_refused_for_what_needs_no_body() {
    let fixture = Fixture::new();
    let server = fixture.server().into_router();
    let expect = || Headers::new().with_expect_continue(true);
    let refused = |request: Request| {
        server
            .check_head(&request, &info())
            .refusal()
            .map_or(Ok(()), |r| Err(code(&r)))
    };
    assert_eq!(refused(req(Method::Put, "/sub").with_headers(expect())), Err(409));
    assert_eq!(
        refused(req(Method::Put, "/no/such/x.txt").with_headers(expect())),
        Err(404)
    );
    let ius = expect().with_if_unmodified_since(Date::from_unix_seconds(0));
    assert_eq!(
        refused(req(Method::Put, "/hello.txt").with_headers(ius)),
        Err(412)
    );
    let identity = expect().with_accept_encoding([Encoding::Identity]);
    assert_eq!(
        refused(req(Method::Post, "/binary.bin").with_headers(identity)),
        Err(412)
    );
    assert_eq!(
        refused(req(Method::Put, "/new.txt").with_headers(expect())),
        Ok(())
    );
    assert!(!fixture.path("new.txt").exists(), "the handshake writes nothing");
}

#[cfg(unix)]
#[test]
fn put_temporary_names_cannot_be_prepared_by_a_client() {
    // The old names were `.jsontp-put-PID-N.tmp`: a client with write access
    // could plant links under the next ones. Links under every such name
    // change nothing now, and no file is left behind.
    let fixture = Fixture::new();
    let outside = Fixture::new();
    fs::write(outside.path("victim.txt"), "untouched").expect("write");
    for n in 0..64 {
        let name = format!(".jsontp-put-{}-{n}.tmp", std::process::id());
        std::os::unix::fs::symlink(outside.path("victim.txt"), fixture.path(&name)).expect("symlink");
    }
    let server = fixture.server().into_router();
    for round in 0..4 {
        let put = req(Method::Put, "/target.txt").with_body(Body::text(format!("round {round}")));
        assert_eq!(code(&ask(&server, put)), 201);
    }
    assert_eq!(
        fs::read_to_string(fixture.path("target.txt")).expect("written"),
        "round 3"
    );
    assert_eq!(
        fs::read_to_string(outside.path("victim.txt")).expect("read"),
        "untouched"
    );
    let names: Vec<String> = fs::read_dir(&fixture.root)
        .expect("list")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert_eq!(names.len(), 64, "only the planted links: {names:?}");
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
    let server = fixture.server().into_router();
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

#[test]
fn media_types_come_from_the_extension_table() {
    use jsontp_cli::file_server::media_type_of;
    for (path, expected) in [
        // The types every jsontp file server is expected to give.
        ("/hello.txt", "text/plain"),
        ("/index.html", "text/html"),
        ("/data.json", "application/json"),
        ("/binary.bin", "application/octet-stream"),
        ("/no-extension", "application/octet-stream"),
        ("/odd.not-a-known-extension", "application/octet-stream"),
        // From the table, in any case.
        ("/LOUD.TXT", "text/plain"),
        ("/logo.png", "image/png"),
        ("/style.css", "text/css"),
        ("/a/b/c.pdf", "application/pdf"),
        // A folder sends its index.html.
        ("/", "text/html"),
        ("/sub/", "text/html"),
    ] {
        assert_eq!(media_type_of(path).essence(), expected, "{path}");
        // No charset: a .txt file need not be UTF-8.
        assert_eq!(media_type_of(path).to_string(), expected, "{path}");
    }
    // What is sent agrees, and a folder named without its slash is still
    // its index.html.
    let fixture = Fixture::new();
    fs::write(fixture.path("logo.png"), [0x89, b'P', b'N', b'G']).expect("write");
    fs::write(fixture.path("sub/index.html"), "sub index").expect("write");
    let server = fixture.server().into_router();
    for (resource, expected) in [("/logo.png", "image/png"), ("/sub", "text/html")] {
        let response = ask(&server, req(Method::Get, resource));
        assert_eq!(code(&response), 200, "{resource}");
        assert_eq!(
            response.headers.content_type().map(|t| t.essence()),
            Some(expected),
            "{resource}"
        );
    }
}

/// The listing a response carries, parsed.
fn listing(response: &Response) -> Vec<serde_json::Value> {
    assert_eq!(code(response), 200, "{}", response.status.human_message);
    assert_eq!(
        response.headers.content_type().map(|t| t.essence()),
        Some("application/json")
    );
    serde_json::from_str(text(response)).expect("a JSON array")
}

fn names(entries: &[serde_json::Value]) -> Vec<&str> {
    entries
        .iter()
        .map(|e| e["name"].as_str().expect("a name"))
        .collect()
}

#[test]
fn d11_a_folder_without_index_is_404_unless_listings_are_on() {
    let fixture = Fixture::new();
    assert_eq!(
        code(&ask(&fixture.server().into_router(), req(Method::Get, "/sub"))),
        404
    );
    assert_eq!(
        code(&ask(
            &fixture.server().with_listing(false).into_router(),
            req(Method::Get, "/sub/")
        )),
        404
    );
    let server = fixture.server().with_listing(true).into_router();
    for resource in ["/sub", "/sub/", "/empty-folder"] {
        let response = ask(&server, req(Method::Get, resource));
        assert_eq!(code(&response), 200, "{resource}");
    }
    assert!(listing(&ask(&server, req(Method::Get, "/empty-folder"))).is_empty());
    // A folder with index.html still serves it.
    let root = ask(&server, req(Method::Get, "/"));
    assert_eq!(text(&root), "<h1>hello</h1>\n");
    // And the root without one is listed.
    fs::remove_file(fixture.path("index.html")).expect("remove");
    let root = listing(&ask(&server, req(Method::Get, "/")));
    assert_eq!(
        names(&root),
        [
            "binary.bin",
            "data.json",
            "empty-folder",
            "hello.txt",
            "old.txt",
            "sub"
        ]
    );
}

#[test]
fn a_listing_names_size_date_and_kind_sorted_by_name() {
    let fixture = Fixture::new();
    fs::write(fixture.path("sub/b.txt"), "12345").expect("write");
    fs::write(fixture.path("sub/A.txt"), "").expect("write");
    fs::create_dir(fixture.path("sub/folder")).expect("folder");
    let old = fixture.path("sub/page.txt");
    fs::File::options()
        .write(true)
        .open(&old)
        .and_then(|f| f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_577_836_800)))
        .expect("mtime");
    let server = fixture.server().with_listing(true).into_router();
    for method in [Method::Get, Method::Post] {
        let entries = listing(&ask(&server, req(method, "/sub/")));
        // Sorted by name, byte order.
        assert_eq!(names(&entries), ["A.txt", "b.txt", "folder", "page.txt"]);
        assert_eq!(entries[1]["size"], 5);
        assert_eq!(entries[1]["is-folder"], false);
        assert_eq!(entries[2]["is-folder"], true);
        assert_eq!(entries[2]["size"], 0);
        // D16 dates.
        assert_eq!(entries[3]["modified"], "2020-01-01T00:00:00Z+0000");
        assert_eq!(entries[3]["size"], 6);
        for entry in &entries {
            let keys: Vec<&String> = entry.as_object().expect("an object").keys().collect();
            assert_eq!(keys.len(), 4, "{entry}");
            let date = entry["modified"].as_str().expect("a date");
            assert!(date.parse::<Date>().is_ok(), "{date}");
        }
    }
}

#[test]
fn d18_a_listing_is_json_for_accept() {
    let fixture = Fixture::new();
    let server = fixture.server().with_listing(true).into_router();
    let html_only = Headers::new().with_accept(ranges(&["text/html"]));
    let refused = ask(&server, req(Method::Get, "/sub").with_headers(html_only));
    assert_eq!(code(&refused), 415);
    let json = Headers::new().with_accept(ranges(&["application/json"]));
    listing(&ask(&server, req(Method::Get, "/sub").with_headers(json)));
}

#[test]
fn d17_a_listing_is_modified_when_an_entry_is() {
    let fixture = Fixture::new();
    let server = fixture.server().with_listing(true).into_router();
    let since = |date: &str| {
        req(Method::Get, "/sub/")
            .with_headers(Headers::new().with_if_modified_since(date.parse::<Date>().expect("a date")))
    };
    // Nothing in sub/ is newer than a date far ahead.
    assert_eq!(code(&ask(&server, since("2999-01-01T00:00:00Z+0000"))), 304);
    // Everything is newer than 2020, including after a folder's own time
    // is set back: an entry's time counts.
    let old_dir = fs::File::open(fixture.path("sub")).expect("open folder");
    old_dir
        .set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_577_836_800))
        .expect("folder mtime");
    assert_eq!(code(&ask(&server, since("2021-01-01T00:00:00Z+0000"))), 200);
}

#[cfg(unix)]
#[test]
fn d7_a_listing_shows_nothing_outside_the_root() {
    let fixture = Fixture::new();
    let outside = Fixture::new();
    let link = |target: &Path, name: &str| {
        std::os::unix::fs::symlink(target, fixture.path(name)).expect("symlink");
    };
    link(&outside.path("hello.txt"), "sub/out-file.txt");
    link(&outside.root, "sub/out-folder");
    link(&fixture.path("nowhere"), "sub/dangling");
    link(&fixture.path("hello.txt"), "sub/in-file.txt");
    link(&fixture.path("empty-folder"), "sub/in-folder");
    let server = fixture.server().with_listing(true).into_router();
    let entries = listing(&ask(&server, req(Method::Get, "/sub")));
    assert_eq!(names(&entries), ["in-file.txt", "in-folder", "page.txt"]);
    // The links inside are described by what they lead to.
    assert_eq!(entries[0]["size"], 13);
    assert_eq!(entries[1]["is-folder"], true);
    // A folder outside is not listed either, though a link names it.
    assert_eq!(code(&ask(&server, req(Method::Get, "/sub/out-folder/"))), 404);
}

/// Writes `content` over `file` and puts its old modification time back,
/// as an edit that hides itself would: only the change time moves.
fn rewrite_in_place(file: &Path, content: &[u8]) {
    let mtime = fs::metadata(file).expect("metadata").modified().expect("mtime");
    fs::write(file, content).expect("rewrite");
    fs::File::options()
        .write(true)
        .open(file)
        .expect("open")
        .set_modified(mtime)
        .expect("mtime");
}

#[test]
fn cached_small_files_are_always_the_current_file() {
    // The small-file cache answers from memory only while the path names
    // the very version it read: edits in place, replacements, removals
    // and a symlink swapped to the outside are all seen at once (D7).
    let fixture = Fixture::new();
    let outside = Fixture::new();
    fs::write(outside.path("secret.txt"), "secret!").expect("write");
    let server = fixture.server().into_router();
    let get = |path: &str| ask(&server, req(Method::Get, path));
    assert_eq!(text(&get("/hello.txt")), "Hello, world!");
    assert_eq!(text(&get("/hello.txt")), "Hello, world!", "from the cache");
    // The media type, known from the name, is kept with the content.
    fs::write(fixture.path("page.html"), "<p>hi</p>").expect("write");
    for _ in ["read", "from the cache"] {
        let media = get("/page.html")
            .headers
            .content_type()
            .map(|m| m.essence().to_owned());
        assert_eq!(media.as_deref(), Some("text/html"));
    }

    // Rewritten in place, same size, the old modification time put back:
    // the change time still moves.
    let file = fixture.path("hello.txt");
    rewrite_in_place(&file, b"Hello, WORLD!");
    assert_eq!(text(&get("/hello.txt")), "Hello, WORLD!");

    // Replaced through PUT (a rename: another inode).
    let put = req(Method::Put, "/hello.txt").with_body(Body::text("replaced"));
    assert!((200..300).contains(&code(&ask(&server, put))));
    assert_eq!(text(&get("/hello.txt")), "replaced");

    // A symlink to the outside in its place: 404, not the cached text.
    fs::remove_file(&file).expect("remove");
    assert_eq!(code(&get("/hello.txt")), 404);
    std::os::unix::fs::symlink(outside.path("secret.txt"), &file).expect("symlink");
    assert_eq!(code(&get("/hello.txt")), 404);

    // Turned off, every request reads the file.
    let uncached = fixture.server().with_cache_bytes(0).into_router();
    fs::remove_file(&file).expect("remove");
    fs::write(&file, "fresh").expect("write");
    assert_eq!(text(&ask(&uncached, req(Method::Get, "/hello.txt"))), "fresh");
}

/// The content a `GET` of `resource` asking for `encoding` carries, as it
/// goes on the wire and reads back (the answer must be in `encoding`).
fn content_on_the_wire(server: &Router, resource: &str, encoding: Encoding) -> Vec<u8> {
    let headers = Headers::new().with_accept_encoding(vec![encoding]);
    let response = ask(server, req(Method::Get, resource).with_headers(headers));
    assert_eq!(response.body.encoding(), encoding);
    let bytes = response.to_bytes();
    // The adapter adds `date` and `language`; lenient reading forgives them.
    let read = parse_response(&bytes, Validation::Lenient, &MessageLimits::default())
        .expect("our own response reads back");
    read.message.body.content().to_vec()
}

#[test]
fn a_cached_file_goes_out_compressed_as_the_current_file() {
    // The small-file cache keeps each compressed form it wrote: what goes
    // on the wire must still be the file as it is now.
    let fixture = Fixture::new();
    let server = fixture.server().into_router();
    let on_the_wire = |encoding| content_on_the_wire(&server, "/hello.txt", encoding);
    for encoding in [Encoding::Gzip, Encoding::Deflate, Encoding::Br] {
        assert_eq!(on_the_wire(encoding), b"Hello, world!", "{encoding}");
        assert_eq!(on_the_wire(encoding), b"Hello, world!", "{encoding}, kept");
    }
    // Rewritten in place, same size, the old modification time put back.
    let file = fixture.path("hello.txt");
    rewrite_in_place(&file, b"Hello, WORLD!");
    for encoding in [Encoding::Gzip, Encoding::Deflate, Encoding::Br] {
        assert_eq!(on_the_wire(encoding), b"Hello, WORLD!", "{encoding}");
    }
}

#[test]
fn a_file_up_to_a_mebibyte_is_kept_whole_and_goes_out_as_the_current_file() {
    // Larger than a small file but within 1 MiB: read whole once and kept
    // with each form it was written in (escaped text, compressed), sent
    // from memory. What goes on the wire must still be the file as it is
    // now, in every encoding.
    let fixture = Fixture::new();
    let server = fixture.server().into_router();
    let on_the_wire = |encoding| content_on_the_wire(&server, "/page.txt", encoding);
    let file = fixture.path("page.txt");
    let first = "a \"quoted\" line \\ with\ttabs and \u{1} escapes\n".repeat(8_000);
    assert!(first.len() > 300 * 1024 && first.len() < 1024 * 1024);
    fs::write(&file, &first).expect("write");
    for encoding in [Encoding::Identity, Encoding::Gzip, Encoding::Br] {
        assert!(on_the_wire(encoding) == first.as_bytes(), "{encoding}");
        assert!(on_the_wire(encoding) == first.as_bytes(), "{encoding}, kept");
    }
    let second = first.replace("quoted", "QUOTED");
    rewrite_in_place(&file, second.as_bytes());
    for encoding in [Encoding::Identity, Encoding::Gzip, Encoding::Br] {
        assert!(
            on_the_wire(encoding) == second.as_bytes(),
            "{encoding}, rewritten"
        );
    }
}

/// The answer to a `GET` of `resource` asking for `encoding`, and whether
/// its content streamed from the file (else it was sent whole).
fn get_streamed(server: &Router, resource: &str, encoding: Encoding) -> (Response, bool) {
    let headers = Headers::new().with_accept_encoding(vec![encoding]);
    let request = req(Method::Get, resource).with_headers(headers);
    let streamed = server
        .respond(Incoming::new(request.clone(), info()))
        .wait()
        .into_parts()
        .1
        .is_some();
    (ask(server, request), streamed)
}

/// The answer to a `GET` of `resource` in `encoding` once it is sent
/// whole: its form, made on a thread of the server's while answers
/// stream, is kept within 30 s.
fn whole_once_made(server: &Router, resource: &str, encoding: Encoding) -> Response {
    for _ in 0..6000 {
        let (response, streamed) = get_streamed(server, resource, encoding);
        if !streamed {
            return response;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!("{resource} in {encoding} still streams after 30 s");
}

/// The text of `response`'s content as its written form on the wire
/// reads back (by serde_json: too large for the server's own limits).
fn text_on_the_wire(response: &Response) -> String {
    let read: serde_json::Value = serde_json::from_slice(&response.to_bytes()).expect("JSON");
    read["body"]["content"].as_str().expect("text").to_owned()
}

#[test]
fn a_text_file_over_a_mebibyte_goes_out_as_identity_from_its_kept_escaped_form_as_the_current_file() {
    // Over 1 MiB, a text file asked for as identity is escaped once per
    // version and kept with a sealed copy for sendfile; other encodings
    // still stream. What goes out must be the file as it is now.
    let fixture = Fixture::new();
    let server = fixture.server().into_router();
    let file = fixture.path("large.txt");
    let first = "a \"quoted\" line \\ with\ttabs and \u{1} escapes, é\n".repeat(60_000);
    assert!(first.len() > 2 * 1024 * 1024);
    fs::write(&file, &first).expect("write");
    // The first answer streams the file and starts making the form on a
    // thread of its own.
    let (response, streamed) = get_streamed(&server, "/large.txt", Encoding::Identity);
    assert!(streamed, "the first answer streams");
    assert_eq!(text_on_the_wire(&response), first, "streamed");
    for round in ["made", "kept"] {
        let response = whole_once_made(&server, "/large.txt", Encoding::Identity);
        assert!(
            response.body.has_sendfile_copy(),
            "{round}: with a copy to send from"
        );
        assert!(response.body.content() == first.as_bytes(), "{round}");
        assert_eq!(text_on_the_wire(&response), first, "{round}");
    }
    let (compressed, streamed) = get_streamed(&server, "/large.txt", Encoding::Gzip);
    assert!(streamed, "compressed as it streams");
    assert!(compressed.body.content() == first.as_bytes());

    // Rewritten in place, same size, the old modification time put back:
    // the kept form is not the file any more.
    let second = first.replace("quoted", "QUOTED");
    rewrite_in_place(&file, second.as_bytes());
    let (response, streamed) = get_streamed(&server, "/large.txt", Encoding::Identity);
    assert!(streamed, "a new version streams while its form is made");
    assert_eq!(text_on_the_wire(&response), second, "rewritten");
    let response = whole_once_made(&server, "/large.txt", Encoding::Identity);
    assert_eq!(text_on_the_wire(&response), second, "rewritten, kept");
    // Replaced through PUT (another inode), shorter.
    let third = first[..first.len() / 2].to_owned();
    let put = req(Method::Put, "/large.txt").with_body(Body::text(third.clone()));
    assert!((200..300).contains(&code(&ask(&server, put))));
    let (response, _) = get_streamed(&server, "/large.txt", Encoding::Identity);
    assert_eq!(text_on_the_wire(&response), third, "replaced");

    // A cache too small for it: the file streams, as before.
    let small = fixture.server().with_cache_bytes(2 << 20).into_router();
    let (response, streamed) = get_streamed(&small, "/large.txt", Encoding::Identity);
    assert!(streamed, "too large for the cache's bound");
    assert!(response.body.content() == third.as_bytes());
}

#[test]
fn a_large_file_is_judged_text_or_not_as_it_is_now() {
    // Whether a streamed file may go out as identity is kept per version
    // of the file: a rewrite that makes it binary is seen at once.
    let fixture = Fixture::new();
    let server = fixture.server().into_router();
    let file = fixture.path("large.txt");
    // Larger than the cache keeps whole (1 MiB): this file streams.
    let text = "a line of text\n".repeat(100_000);
    fs::write(&file, &text).expect("write");
    let get = || ask(&server, req(Method::Get, "/large.txt"));
    for _ in 0..2 {
        let response = get();
        assert_eq!(response.body.encoding(), Encoding::Identity);
        assert_eq!(response.body.content(), text.as_bytes());
    }
    let mut binary = text.into_bytes();
    binary[1_200_000] = 0xff;
    rewrite_in_place(&file, &binary);
    let response = get();
    assert_eq!(response.body.encoding(), Encoding::Gzip, "not UTF-8 any more");
    assert_eq!(response.body.content(), binary.as_slice());
}

#[test]
fn d14_a_token_is_taken_alone_or_after_bearer() {
    let fixture = Fixture::new();
    let server = fixture.server().with_token(Some("s3cret".into())).into_router();
    for (value, expected) in [
        ("s3cret", 201),
        ("Bearer s3cret", 201),
        ("bearer s3cret", 201),
        ("BEARER s3cret", 201),
        ("Bearer  s3cret", 401),
        ("Bearer wrong", 401),
        ("Basic s3cret", 401),
        ("Bearer ", 401),
    ] {
        let put = req(Method::Put, "/t.txt")
            .with_body(Body::text("x"))
            .with_headers(Headers::new().with_authorization(value.to_owned()));
        assert_eq!(code(&ask(&server, put)), expected, "{value:?}");
    }
    // A token that itself starts with the scheme's word still works alone.
    let server = fixture
        .server()
        .with_token(Some("Bearer odd".into()))
        .into_router();
    for (value, expected) in [("Bearer odd", 201), ("Bearer Bearer odd", 201), ("odd", 401)] {
        let put = req(Method::Put, "/t.txt")
            .with_body(Body::text("x"))
            .with_headers(Headers::new().with_authorization(value.to_owned()));
        assert_eq!(code(&ask(&server, put)), expected, "{value:?}");
    }
}

#[test]
fn a_name_the_server_refuses_is_400_with_the_reason_and_never_listed() {
    let fixture = Fixture::new();
    fs::write(fixture.path("empty-folder/we\"ird\\name.txt"), "odd").expect("write");
    fs::write(fixture.path("empty-folder/plain.txt"), "plain").expect("write");
    let server = fixture.server().with_listing(true).into_router();
    let entries = listing(&ask(&server, req(Method::Get, "/empty-folder")));
    assert_eq!(names(&entries), ["plain.txt"], "{entries:?}");
    for method in [Method::Get, Method::Put, Method::Delete, Method::Options] {
        let request = req(method, "/empty-folder/we%22ird%5Cname.txt").with_body(Body::text("x"));
        let response = ask(&server, request);
        assert_eq!(code(&response), 400, "{method}");
        assert!(
            response.status.human_message.contains("backslash"),
            "{method}: {}",
            response.status.human_message
        );
    }
    assert_eq!(
        fs::read_to_string(fixture.path("empty-folder/we\"ird\\name.txt")).expect("kept"),
        "odd"
    );
}

#[test]
fn refusals_say_the_next_step() {
    let fixture = Fixture::new();
    let read_only = fixture.server().with_writes(false).into_router();
    let put = ask(
        &read_only,
        req(Method::Put, "/new.txt").with_body(Body::text("x")),
    );
    assert_eq!(code(&put), 405);
    let said = &put.status.human_message;
    assert!(
        said.contains("read-only") && said.contains("--writable") && said.contains("--token"),
        "{said}"
    );
    // A folder without index.html, listings off: 404 (D11), saying so.
    let folder = ask(&fixture.server().into_router(), req(Method::Get, "/empty-folder"));
    assert_eq!(code(&folder), 404);
    assert!(
        folder.status.human_message.contains("--list"),
        "{}",
        folder.status.human_message
    );
    let missing = ask(&fixture.server().into_router(), req(Method::Get, "/nope.txt"));
    assert_eq!(missing.status.human_message, "no file by this name");
}

#[test]
fn a_long_listing_reads_its_folder_once_for_all_its_pages() {
    // Each page of a long listing costs about a page: the folder is read
    // through once and its sorted names kept while it is unchanged.
    let fixture = Fixture::new();
    let folder = fixture.path("many");
    fs::create_dir(&folder).expect("folder");
    let mut expected: Vec<String> = (0..4500).map(|i| format!("file {i:05}.txt")).collect();
    for name in &expected {
        fs::write(folder.join(name), "x").expect("file");
    }
    // Changed long ago: a folder changed just before it is read is kept
    // for a second only, as its times may not move on a change within the
    // same tick.
    let set_back = || {
        fs::File::open(&folder)
            .and_then(|f| f.set_modified(SystemTime::now() - Duration::from_secs(3600)))
            .expect("folder mtime");
    };
    set_back();
    let files = Arc::new(fixture.server().with_listing(true));
    let server = Arc::clone(&files).router();
    let walk = || {
        let mut resource = "/many/".to_owned();
        let mut seen = Vec::new();
        for _ in 0..10 {
            let response = ask(&server, req(Method::Get, &resource));
            seen.extend(
                listing(&response)
                    .iter()
                    .filter_map(|e| e["name"].as_str().map(str::to_owned)),
            );
            match response.body.extra().get("next-page") {
                Some(next) => resource = next.as_str().expect("a resource").to_owned(),
                None => return seen,
            }
        }
        panic!("4500 entries in pages of 2000 end");
    };
    assert_eq!(walk(), expected, "every name once, in order");
    assert_eq!(files.folder_reads(), 1, "three pages, one read of the folder");
    assert_eq!(walk(), expected);
    assert_eq!(files.folder_reads(), 1, "and none for the same pages again");
    // A change is seen at once: the folder's times moved.
    fs::write(folder.join("file 02000a.txt"), "x").expect("file");
    set_back();
    expected.push("file 02000a.txt".to_owned());
    expected.sort();
    assert_eq!(walk(), expected);
    assert_eq!(files.folder_reads(), 2);
}

/// One JSON message read from `stream`.
fn read_message(stream: &mut std::net::TcpStream) -> serde_json::Value {
    serde_json::Deserializer::from_reader(stream)
        .into_iter()
        .next()
        .expect("an answer")
        .expect("JSON")
}

#[test]
fn d10_a_first_request_without_a_body_is_acknowledged_or_refused_with_501() {
    use std::io::{Read, Write};
    // D10: the first request's body may be absent.
    let first = r#"{"jsontp":"1.0","type":"request","resource":"/up.txt","method":"PUT","headers":{"expect":"100-continue"}}"#;
    let full = r#"{"jsontp":"1.0","type":"request","resource":"/up.txt","method":"PUT","headers":{},"body":{"content":"hi","encoding":"identity"}}"#;
    let connect = |server: &crate::support::Served| {
        let stream = std::net::TcpStream::connect(server.addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        stream
    };
    let server = crate::support::Served::start("continue-without-body");
    let mut stream = connect(&server);
    stream.write_all(first.as_bytes()).expect("send");
    let answer = read_message(&mut stream);
    assert_eq!(answer["status"]["code"], 100, "{answer}");
    stream.write_all(full.as_bytes()).expect("send");
    let answer = read_message(&mut stream);
    assert_eq!(answer["status"]["code"], 201, "{answer}");
    assert_eq!(
        fs::read_to_string(server.root.join("up.txt")).expect("stored"),
        "hi"
    );
    // Without 100-continue: 501, then the close.
    let server = crate::support::Served::start_with("continue-without-body-refused", &["--no-continue"]);
    let mut stream = connect(&server);
    stream.write_all(first.as_bytes()).expect("send");
    let answer = read_message(&mut stream);
    assert_eq!(answer["status"]["code"], 501, "{answer}");
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).expect("the server closes");
    assert!(rest.iter().all(u8::is_ascii_whitespace), "{rest:?}");
}

#[cfg(unix)]
#[test]
fn a_put_out_of_descriptors_is_503_and_stores_nothing() {
    // As a GET out of descriptors: the condition passes, and nothing was
    // written, so the client may simply try again.
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpStream;

    use crate::support::{spawn_serve_short_of_descriptors, temp_root};

    let root = temp_root("put-out-of-descriptors");
    let Some((server, addr)) = spawn_serve_short_of_descriptors(&root, "--writable") else {
        return;
    };
    let send = |stream: &mut TcpStream, method: &str, content: &str| {
        let request = serde_json::json!({
            "jsontp": "1.0", "type": "request", "resource": "/new.txt", "method": method,
            "headers": {}, "body": {"content": content, "encoding": "identity"}
        });
        let _ = stream.write_all(format!("{request}\n").as_bytes());
        let mut answer = String::new();
        let read = BufReader::new(stream.try_clone().expect("clone")).read_line(&mut answer);
        read.ok().filter(|&n| n > 0).map(|_| answer)
    };
    let connect = |wait: Duration| {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(wait)).expect("timeout");
        stream
    };
    // Idle connections take the descriptors, until one more is not
    // accepted (it waits in the backlog) …
    let mut idle = Vec::new();
    loop {
        let mut stream = connect(Duration::from_millis(500));
        if send(&mut stream, "OPTIONS", "").is_none() {
            break;
        }
        idle.push(stream);
        assert!(idle.len() < 64, "the descriptor limit did not bite");
    }
    // … then one leaves, and the next connection takes its descriptor:
    // none is left to write the file with.
    idle.pop();
    std::thread::sleep(Duration::from_millis(200));
    let mut stream = connect(Duration::from_secs(20));
    let answer = send(&mut stream, "PUT", "hello").expect("an answer");
    let answer: serde_json::Value = serde_json::from_str(&answer).expect("JSON");
    assert_eq!(answer["status"]["code"], 503, "{answer}");
    let said = answer["status"]["human-message"].as_str().unwrap_or_default();
    assert!(said.contains("out of file descriptors"), "{answer}");
    assert!(said.contains("nothing was written"), "{answer}");
    assert!(!root.join("new.txt").exists());
    let names: Vec<_> = fs::read_dir(&root)
        .expect("root")
        .flatten()
        .map(|entry| entry.file_name())
        .collect();
    assert_eq!(names, ["hello.txt"], "no temporary file left either");
    // Descriptors back, the same request succeeds.
    drop(stream);
    drop(idle);
    std::thread::sleep(Duration::from_millis(200));
    let answer = send(&mut connect(Duration::from_secs(20)), "PUT", "hello").expect("an answer");
    let answer: serde_json::Value = serde_json::from_str(&answer).expect("JSON");
    assert_eq!(answer["status"]["code"], 201, "{answer}");
    drop(server);
    let _ = fs::remove_dir_all(&root);
}
