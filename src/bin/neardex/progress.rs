//! Progress on stderr for long work, only when stderr is a terminal.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Set by the Ctrl-C handler; long loops check it.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Installs the Ctrl-C handler (once).
pub fn catch_interrupt() {
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst));
}

/// Whether Ctrl-C was pressed.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

fn target() -> ProgressDrawTarget {
    if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    }
}

/// A bar over `total` bytes with rate and ETA.
pub fn bytes(total: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total), target());
    let style = ProgressStyle::with_template("{bar:30} {bytes}/{total_bytes} {bytes_per_sec} eta {eta} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

/// A spinner with a count and a rate, for work of unknown size.
pub fn spinner(what: &'static str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(None, target());
    let style = ProgressStyle::with_template("{spinner} {msg} {pos} ({per_sec}) {elapsed}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    bar.set_style(style);
    bar.set_message(what);
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}
