//! Prints the visible text of an HTML file, as neardex sees it.
//!
//! Run: `cargo run --release --example extract -- page.html`
fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: extract FILE.html");
        std::process::exit(2);
    };
    match std::fs::read(&path) {
        Ok(bytes) => println!("{}", neardex::text::html_bytes_to_text(&bytes)),
        Err(e) => {
            eprintln!("extract: {path}: {e}");
            std::process::exit(1);
        }
    }
}
