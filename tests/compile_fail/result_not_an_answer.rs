// A handler's result that is no answer.
use jsontp_protocol::app::{Router, get};

#[allow(dead_code)]
struct Post {
    subject: String,
}

fn main() {
    let _: Router = Router::new().route(
        "/posts/1",
        get(|| Post {
            subject: "hello".to_owned(),
        }),
    );
}
