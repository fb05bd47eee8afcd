//! Real child processes: a writer in another process locks out a second
//! writer, a read-only opener follows its commits, and SIGKILL between
//! commits loses nothing that was acknowledged.
//!
//! The child is this test binary re-run with `NEARDEX_CHILD_DIR` set: the
//! `child_writer` test then writes and prints each acknowledged commit until
//! it is killed. Without the variable it does nothing.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use neardex::store::{Document, Index, IndexError, IndexOptions, Metadata};
use neardex::SignatureConfig;

const CHILD_DIR: &str = "NEARDEX_CHILD_DIR";

const CHILD_PREFIX: &str = "NEARDEX_CHILD_PREFIX";

/// Set: the child runs flushes and merges on the index's background thread.
const CHILD_BACKGROUND: &str = "NEARDEX_CHILD_BACKGROUND";

#[test]
fn child_writer() {
    let Ok(dir) = std::env::var(CHILD_DIR) else { return };
    let prefix = std::env::var(CHILD_PREFIX).unwrap_or_else(|_| "doc".into());
    let background_maintenance = std::env::var_os(CHILD_BACKGROUND).is_some();
    let options = IndexOptions { flush_threshold: 7, background_maintenance, ..IndexOptions::default() };
    let index = open_when_released(&dir, options);
    for n in 0u64.. {
        let mut w = index.writer().unwrap();
        let text = format!("Document number {n} is about the {} and it has been written.", n % 13);
        w.insert(&format!("{prefix}-{n}"), Document::Text(&text), Metadata::default()).unwrap();
        w.commit().unwrap();
        // Printed only after the commit returned: an acknowledged insert.
        println!("committed {prefix}-{n}");
    }
}

/// Opens the index for writing, waiting up to 10 s while it is locked.
///
/// The tests in this binary run on parallel threads, and each spawns
/// children. A spawn copies the spawning process's descriptors into the new
/// process until it execs, and an `flock` lives as long as any copy of its
/// descriptor: a lock that one test held at the instant another test
/// spawned stays held, for that instant, after its holder released it. A
/// child that starts within it sees [`IndexError::Locked`] for an index no
/// live writer holds, so it waits the instant out. The waits are bounded:
/// a lock that is really held still fails the test.
fn open_when_released(dir: &str, options: IndexOptions) -> Index {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match Index::open_with(dir, options) {
            Err(IndexError::Locked { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            opened => return opened.expect("child opens the index"),
        }
    }
}

/// Spawns a child writer on `dir` (with background maintenance if asked);
/// its stderr goes to `stderr` (a file, so that a child that dies early can
/// say why without blocking on a pipe).
fn spawn_child(dir: &std::path::Path, stderr: &std::path::Path, background: bool) -> std::process::Child {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "child_writer", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(stderr).expect("child stderr file"));
    if background {
        command.env(CHILD_BACKGROUND, "1");
    }
    command.spawn().expect("spawn child writer")
}

/// Reads the child's acknowledgements until `count` have arrived.
fn acknowledged(lines: &mut impl Iterator<Item = String>, count: usize) -> Vec<String> {
    lines.filter_map(|l| l.strip_prefix("committed ").map(str::to_owned)).take(count).collect()
}

#[test]
fn writer_in_another_process_locks_and_survives_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    Index::create(dir.path(), SignatureConfig::default()).unwrap();
    for trial in 0..5 {
        let stderr = logs.path().join(format!("child-{trial}.stderr"));
        let mut child = spawn_child(dir.path(), &stderr, trial % 2 == 1);
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut lines = stdout.lines().map_while(Result::ok);
        let seen = acknowledged(&mut lines, 5 + trial * 3);
        if seen.len() != 5 + trial * 3 {
            let _ = child.wait();
            let said = std::fs::read_to_string(&stderr).unwrap_or_default();
            panic!("trial {trial}: child stopped after {} acknowledgements; its stderr:\n{said}", seen.len());
        }

        // A second writer is refused while the child holds the index.
        assert!(matches!(Index::open(dir.path()), Err(IndexError::Locked { .. })));
        // A read-only opener sees at least what was acknowledged so far.
        let reader = Index::open_read_only(dir.path()).unwrap();
        reader.reload().unwrap();
        let searcher = reader.searcher().unwrap();
        for key in &seen {
            assert!(searcher.get(key).unwrap().is_some(), "read-only opener misses {key}");
        }
        drop((searcher, reader));

        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();
        // Acknowledgements printed before the kill that we had not read yet.
        let late: Vec<String> = lines.filter_map(|l| l.strip_prefix("committed ").map(str::to_owned)).collect();

        let index = Index::open(dir.path()).expect("reopens after SIGKILL");
        index.verify().expect("verifies after SIGKILL");
        let searcher = index.searcher().unwrap();
        for key in seen.iter().chain(&late) {
            assert!(searcher.get(key).unwrap().is_some(), "trial {trial}: acknowledged {key} lost");
        }
        // The next child continues numbering from zero: replace the keys so
        // every trial writes. Clearing the index keeps trials independent.
        let keys: Vec<String> = (0..searcher.len() + 64).map(|n| format!("doc-{n}")).collect();
        drop(searcher);
        let mut w = index.writer().unwrap();
        for key in keys {
            w.delete(&key).unwrap();
        }
        w.commit().unwrap();
    }
}

/// SIGKILL at a random moment (before the first commit, mid-commit,
/// mid-flush, mid-merge; every other trial with background maintenance),
/// many times: the index always reopens, verifies,
/// and holds every insert the child acknowledged. 300 trials by default;
/// `NEARDEX_KILL_TRIALS=100000 cargo test --release --test processes
/// kill_9_trials` for the long run.
#[test]
fn kill_9_trials() {
    let trials: u64 = std::env::var("NEARDEX_KILL_TRIALS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let mut dir = tempfile::tempdir().unwrap();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let (mut acknowledged_total, mut before_first_ack) = (0usize, 0u64);
    for trial in 0..trials {
        // A fresh index every 500 trials keeps each trial's verify small,
        // so the long runs stay linear in the number of trials.
        if trial % 500 == 0 {
            dir = tempfile::tempdir().unwrap();
            Index::create(dir.path(), SignatureConfig::default()).unwrap();
        }
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let delay = std::time::Duration::from_micros(state % 40_000);
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args(["--exact", "child_writer", "--nocapture", "--test-threads=1"])
            .env(CHILD_DIR, dir.path())
            .env(CHILD_PREFIX, format!("t{trial}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        // Every other trial kills a child whose flushes and merges run on
        // the background thread.
        if trial % 2 == 1 {
            command.env(CHILD_BACKGROUND, "1");
        }
        let mut child = command.spawn().expect("spawn child writer");
        std::thread::sleep(delay);
        child.kill().unwrap();
        child.wait().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let acked: Vec<String> = stdout
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| l.strip_prefix("committed ").map(str::to_owned))
            .collect();
        before_first_ack += u64::from(acked.is_empty());
        acknowledged_total += acked.len();
        let index = Index::open(dir.path()).unwrap_or_else(|e| panic!("trial {trial}: reopen failed: {e}"));
        index.verify().unwrap_or_else(|e| panic!("trial {trial}: verify failed: {e}"));
        let searcher = index.searcher().unwrap();
        for key in &acked {
            assert!(searcher.get(key).unwrap().is_some(), "trial {trial}: acknowledged {key} lost");
        }
    }
    println!(
        "{trials} SIGKILL trials: {acknowledged_total} acknowledged inserts all present; \
         {before_first_ack} trials killed before their first acknowledgement"
    );
}
