//! The blocking client: two requests on one connection, then a pipeline.
//!
//! ```text
//! jsontp serve &            # serves the current folder on 127.0.0.1:8080
//! cargo run --example fetch -- 127.0.0.1:8080 /README.md /Cargo.toml
//! ```

use jsontp_protocol::io_adapters::client::ClientOptions;
use jsontp_protocol::io_adapters::client::blocking::Client;
use jsontp_protocol::message::{Method, Request};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8080".into());
    let paths: Vec<String> = args.collect();
    let paths = if paths.is_empty() {
        vec!["/".to_owned()]
    } else {
        paths
    };

    let mut client = Client::connect(addr.as_str(), ClientOptions::default())?;
    let requests = paths
        .iter()
        .map(|path| Ok(Request::new(Method::Get, path.parse()?)))
        .collect::<Result<Vec<_>, jsontp_protocol::message::ValueError>>()?;
    // Pipelined: every request goes out at once; one outcome each, in order.
    for (path, outcome) in paths.iter().zip(client.send_all(requests)) {
        match outcome {
            Ok(answer) => {
                let status = &answer.response.status;
                let size = answer.response.body.content().len();
                println!(
                    "{path}: {} {} ({size} bytes)",
                    status.code.as_u16(),
                    status.formal_message()
                );
            }
            Err(error) => println!("{path}: {error}"),
        }
    }
    Ok(())
}
