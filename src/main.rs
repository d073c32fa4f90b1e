//! The `jsontp` command: `jsontp serve` and the client commands.

fn main() {
    eprintln!("jsontp: not built yet");
    std::process::exit(2);
}
