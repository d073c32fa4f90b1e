// A handler asks for a state its router is not given.
use jsontp_protocol::app::{Router, State, get};

#[derive(Clone)]
struct Db;

fn main() {
    let _: Router = Router::new().route("/posts", get(|State(_db): State<Db>| "posts"));
}
