// A handler's argument that no extractor gives.
use jsontp_protocol::app::{Path, Router, get};

fn main() {
    let _: Router = Router::new().route(
        "/posts/{id}",
        get(|Path(id): Path<u32>, name: String| format!("{id} {name}")),
    );
}
