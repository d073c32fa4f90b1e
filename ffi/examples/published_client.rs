//! The published crate's client (`jsontp` 0.1.3 on crates.io, another
//! author's) as a command, for the interop tests of the C servers
//! (`ffi/tests/interop.sh`): `published_client PORT METHOD RESOURCE
//! [CONTENT]` sends one request to 127.0.0.1, prints the content, and exits
//! 0 for a status under 400, 1 otherwise, 2 when there was no answer.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(port), Some(method), Some(resource)) = (
        args.get(1).and_then(|p| p.parse::<u16>().ok()),
        args.get(2),
        args.get(3),
    ) else {
        eprintln!("usage: published_client PORT METHOD RESOURCE [CONTENT]");
        return ExitCode::from(2);
    };
    let mut request = jsontp_ref::client::Request::new()
        .method(method)
        .resource(resource);
    if let Some(content) = args.get(4) {
        request = request.body(content.clone(), "identity");
    }
    match request.send("127.0.0.1", port) {
        Ok(answer) => {
            print!("{}", answer.body.content);
            eprintln!("{} {}", answer.status.code, answer.status.human_message);
            ExitCode::from(if answer.status.code < 400 { 0 } else { 1 })
        }
        Err(e) => {
            eprintln!("published_client: {e:?}");
            ExitCode::from(2)
        }
    }
}
