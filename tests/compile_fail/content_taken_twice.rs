// The content can be taken once, by the last argument.
use jsontp_protocol::app::{Content, Router, Text, post};

fn main() {
    let _: Router = Router::new().route(
        "/upload",
        post(|Text(text): Text, content: Content| format!("{text} {}", content.len())),
    );
}
