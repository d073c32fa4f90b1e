//! Extraction failures: the right status, and a `human-message` that
//! names the key and what is wrong with it.

use jsontp_protocol::app::{
    Authorization, Content, FromRef, Keys, Path, Query, Router, State, Text, get, post,
};
use jsontp_protocol::io_adapters::server::{RequestInfo, ServerOptions};
use jsontp_protocol::message::{Body, Cookies, Headers, Method, Request, StatusCode};
use serde::Deserialize;
use serde_json::json;

use crate::support::{RUNTIMES, ask, request, start};

#[derive(Deserialize)]
struct Author {
    username: String,
    #[allow(dead_code)]
    password: String,
}

#[derive(Deserialize)]
struct Post {
    subject: String,
    #[allow(dead_code)]
    body: String,
}

#[derive(Deserialize)]
struct Nnntp {
    group: String,
    post: Post,
    author: Author,
}

#[derive(Deserialize)]
struct Op {
    nnntp: Nnntp,
}

#[derive(Deserialize)]
struct Page {
    page: u32,
    q: Option<String>,
}

fn router() -> Router {
    Router::new()
        .route(
            "/post",
            get(|Keys(op): Keys<Op>| {
                format!(
                    "{} in {} by {}",
                    op.nnntp.post.subject, op.nnntp.group, op.nnntp.author.username
                )
            }),
        )
        .route("/posts/{id}", get(|Path(id): Path<u64>| format!("post {id}")))
        .route(
            "/search",
            get(|Query(page): Query<Page>| format!("page {} of {}", page.page, page.q.unwrap_or_default())),
        )
        .route(
            "/private",
            get(|auth: Authorization| format!("token {}", auth.token())),
        )
        .route(
            "/echo",
            jsontp_protocol::app::post(|cookies: Cookies, headers: Headers, Text(text): Text| {
                let session = cookies.get("session").unwrap_or("none").to_owned();
                let typed = headers.content_type().map(|t| t.to_string()).unwrap_or_default();
                format!("{text}/{session}/{typed}")
            }),
        )
}

fn post_keys(author: serde_json::Value) -> serde_json::Value {
    json!({"nnntp": {"group": "rust", "post": {"subject": "hi", "body": "text"}, "author": author}})
}

#[test]
fn a_missing_or_mistyped_body_key_is_400_naming_it() {
    for &runtime in RUNTIMES {
        let server = start(runtime, router(), ServerOptions::default());
        let good = ask(
            server.addr,
            request(
                Method::Get,
                "/post",
                post_keys(json!({"username": "ada", "password": "pw"})),
            ),
        );
        assert_eq!(good.body.as_text(), Some("hi in rust by ada"), "{runtime:?}");

        let missing = ask(
            server.addr,
            request(Method::Get, "/post", post_keys(json!({"username": "ada"}))),
        );
        assert_eq!(missing.status.code, StatusCode::BAD_REQUEST, "{runtime:?}");
        assert_eq!(
            missing.status.human_message, "body key `nnntp.author`: missing field `password`",
            "{runtime:?}"
        );

        let mistyped = ask(
            server.addr,
            request(
                Method::Get,
                "/post",
                post_keys(json!({"username": 7, "password": "pw"})),
            ),
        );
        assert_eq!(mistyped.status.code, StatusCode::BAD_REQUEST, "{runtime:?}");
        let message = &mistyped.status.human_message;
        assert!(
            message.starts_with(
                "body key `nnntp.author.username`: invalid type: integer `7`, expected a string"
            ),
            "{runtime:?}: {message}"
        );

        let none = ask(server.addr, request(Method::Get, "/post", json!({})));
        assert_eq!(
            none.status.human_message, "body keys: missing field `nnntp`",
            "{runtime:?}"
        );
    }
}

#[test]
fn a_path_parameter_or_query_key_of_the_wrong_type_is_400_naming_it() {
    for &runtime in RUNTIMES {
        let server = start(runtime, router(), ServerOptions::default());
        assert_eq!(
            ask(server.addr, request(Method::Get, "/posts/12", json!({})))
                .body
                .as_text(),
            Some("post 12")
        );
        let wrong = ask(server.addr, request(Method::Get, "/posts/twelve", json!({})));
        assert_eq!(wrong.status.code, StatusCode::BAD_REQUEST, "{runtime:?}");
        assert_eq!(
            wrong.status.human_message,
            "path parameter `id` is `twelve`, which is not a whole number from 0 up"
        );

        let found = ask(
            server.addr,
            request(Method::Get, "/search?page=2&q=tower+layers", json!({})),
        );
        assert_eq!(
            found.body.as_text(),
            Some("page 2 of tower layers"),
            "{runtime:?}"
        );
        let bad = ask(server.addr, request(Method::Get, "/search?page=-1", json!({})));
        assert_eq!(bad.status.code, StatusCode::BAD_REQUEST, "{runtime:?}");
        assert!(
            bad.status.human_message.contains("query key `page`"),
            "{}",
            bad.status.human_message
        );
        let missing = ask(server.addr, request(Method::Get, "/search?q=x", json!({})));
        assert_eq!(missing.status.code, StatusCode::BAD_REQUEST, "{runtime:?}");
        assert!(
            missing.status.human_message.contains("`page`"),
            "{}",
            missing.status.human_message
        );
    }
}

#[test]
fn authorization_is_401_when_missing_and_the_bearer_scheme_is_optional() {
    for &runtime in RUNTIMES {
        let server = start(runtime, router(), ServerOptions::default());
        let refused = ask(server.addr, request(Method::Get, "/private", json!({})));
        assert_eq!(refused.status.code, StatusCode::UNAUTHORIZED, "{runtime:?}");
        assert!(refused.status.human_message.contains("authorization"));
        for value in ["Bearer s3cret", "s3cret"] {
            let mut with = request(Method::Get, "/private", json!({}));
            with.headers = Headers::new().with_authorization(value.to_owned());
            assert_eq!(
                ask(server.addr, with).body.as_text(),
                Some("token s3cret"),
                "{runtime:?}"
            );
        }
    }
}

#[test]
fn text_cookies_and_typed_headers_come_through() {
    for &runtime in RUNTIMES {
        let server = start(runtime, router(), ServerOptions::default());
        let mut cookies = Cookies::new();
        cookies.set("session", "4f2a");
        let mut echo = request(Method::Post, "/echo", json!({}));
        echo.headers = Headers::new().with_cookies(cookies).with_content_type(
            "text/plain"
                .parse::<jsontp_protocol::message::MediaType>()
                .unwrap(),
        );
        echo.body = Body::text("words");
        let answer = ask(server.addr, echo);
        assert_eq!(
            answer.body.as_text(),
            Some("words/4f2a/text/plain"),
            "{runtime:?}"
        );
    }
}

/// An application's state, of which handlers take a part each.
#[derive(Clone)]
struct App {
    greeting: Greeting,
    visits: Visits,
}

#[derive(Clone)]
struct Greeting(&'static str);

#[derive(Clone, Default)]
struct Visits(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl FromRef<App> for Greeting {
    fn from_ref(app: &App) -> Greeting {
        app.greeting.clone()
    }
}

impl FromRef<App> for Visits {
    fn from_ref(app: &App) -> Visits {
        app.visits.clone()
    }
}

#[test]
fn a_handler_takes_the_part_of_the_routers_state_it_names() {
    use std::sync::atomic::Ordering;

    let visits = Visits::default();
    let app = App {
        greeting: Greeting("hello"),
        visits: visits.clone(),
    };
    let router: Router = Router::new()
        .route(
            "/hello",
            get(
                |State(Greeting(text)): State<Greeting>, State(visits): State<Visits>| {
                    let n = visits.0.fetch_add(1, Ordering::SeqCst) + 1;
                    format!("{text} #{n}")
                },
            ),
        )
        .route("/whole", get(|State(app): State<App>| app.greeting.0))
        .with_state(app);
    let peer = RequestInfo::new("127.0.0.1:1".parse().unwrap());
    let get_text = |path: &str| {
        let request = Request::new(Method::Get, path.parse().unwrap());
        let response = router.handle(request, &peer);
        response.body.as_text().map(str::to_owned)
    };
    assert_eq!(get_text("/hello").as_deref(), Some("hello #1"));
    assert_eq!(get_text("/hello").as_deref(), Some("hello #2"));
    assert_eq!(get_text("/whole").as_deref(), Some("hello"));
    assert_eq!(visits.0.load(Ordering::SeqCst), 2);
}

#[test]
fn the_content_reaches_the_handler_moved_not_copied() {
    // The handlers report where the bytes they got lie.
    let router: Router = Router::new()
        .route(
            "/content",
            post(|content: Content| {
                let bytes = content.into_bytes()?;
                Ok::<_, jsontp_protocol::app::Refusal>(format!("{:p}", bytes.as_ptr()))
            }),
        )
        .route("/bytes", post(|bytes: Vec<u8>| format!("{:p}", bytes.as_ptr())));
    let peer = RequestInfo::new("127.0.0.1:1".parse().unwrap());
    for path in ["/content", "/bytes"] {
        let request =
            Request::new(Method::Post, path.parse().unwrap()).with_body(Body::text("x".repeat(4096)));
        let sent_at = format!("{:p}", request.body.content().as_ptr());
        let response = router.handle(request, &peer);
        assert_eq!(response.body.as_text(), Some(sent_at.as_str()), "{path}");
    }
}
