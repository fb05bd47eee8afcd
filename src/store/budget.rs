//! How much of an index [`Searcher::self_join`](super::Searcher::self_join)
//! keeps mapped: all of it when the snapshot's segments fit in the memory
//! this process can have, else half of that memory
//! ([`Searcher::self_join_within`](super::Searcher::self_join_within)), so
//! that a join over an index larger than memory does not thrash the page
//! cache (README, "Pairs in bounded memory").

use std::path::Path;

/// The bytes of vectors a join over segments of `index_bytes`
/// ([`Searcher::segment_bytes`](super::Searcher::segment_bytes)) keeps
/// mapped, with `available()` bytes of memory (`None`: unknown, the join
/// unbounded): `None` when the index fits, else half the memory, at least
/// [`Searcher::LEAST_MAPPED`](super::Searcher::LEAST_MAPPED). An index of
/// no more than that least bound is joined whole whatever the memory (its
/// vectors fit in the least bound), so `available` is not called: reading
/// it ([`available_memory`]: `/proc/meminfo` and the cgroup's files) took
/// three quarters of the self-join of an index of 15 short documents.
pub(super) fn join_mapped(index_bytes: u64, available: impl FnOnce() -> Option<u64>) -> Option<usize> {
    if index_bytes <= super::Searcher::LEAST_MAPPED as u64 {
        return None;
    }
    let available = available()?;
    (index_bytes > available)
        .then(|| usize::try_from(available / 2).unwrap_or(usize::MAX).max(super::Searcher::LEAST_MAPPED))
}

/// The bytes of memory this process can have now: `MemAvailable` of
/// `/proc/meminfo`, or its memory cgroup's limit (v2 or v1, the limits of
/// the cgroups above it counted) when that is less; `None` where neither
/// can be read (other systems).
pub fn available_memory() -> Option<u64> {
    let free = std::fs::read_to_string("/proc/meminfo").ok().as_deref().and_then(mem_available);
    let limit = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|cgroups| cgroup_limit(&cgroups, Path::new("/sys/fs/cgroup")));
    match (free, limit) {
        (Some(free), Some(limit)) => Some(free.min(limit)),
        (free, limit) => free.or(limit),
    }
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|line| line.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The memory limit of the cgroup a `/proc/self/cgroup` text names, read
/// under `root` (`/sys/fs/cgroup`), its ancestors' counted: under v2 the
/// least `memory.max` or `memory.high` of the cgroup and every cgroup
/// above it (a container's limit is often set on a parent, and past
/// `memory.high` the kernel throttles and reclaims); under v1 the memory
/// hierarchy's `memory.limit_in_bytes` or, when less, the
/// `hierarchical_memory_limit` of its `memory.stat` (the ancestors'
/// least). `None` when there is none ("max", or v1's near-2^63 for no
/// limit) or none can be read.
fn cgroup_limit(cgroups: &str, root: &Path) -> Option<u64> {
    let read = |file: std::path::PathBuf| std::fs::read_to_string(file).ok().as_deref().and_then(limit_in);
    cgroups.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        let path = Path::new(path.trim_start_matches('/'));
        if controllers.is_empty() {
            path.ancestors()
                .flat_map(|dir| ["memory.max", "memory.high"].map(|file| read(root.join(dir).join(file))))
                .flatten()
                .min()
        } else if controllers.split(',').any(|c| c == "memory") {
            let dir = root.join("memory").join(path);
            let hierarchical = std::fs::read_to_string(dir.join("memory.stat")).ok().and_then(|stat| {
                stat.lines().find_map(|line| line.strip_prefix("hierarchical_memory_limit ")).and_then(limit_in)
            });
            [read(dir.join("memory.limit_in_bytes")), hierarchical].into_iter().flatten().min()
        } else {
            None
        }
    })
}

/// A limit as a cgroup file writes it (bytes, surrounding whitespace
/// allowed); `None` for "max", v1's near-2^63 for no limit, or anything
/// else that is not one.
fn limit_in(text: &str) -> Option<u64> {
    let limit: u64 = text.trim().parse().ok()?;
    (limit < 1 << 60).then_some(limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_read_in_bytes() {
        let meminfo = "MemTotal:       24000000 kB\nMemFree:         1000 kB\nMemAvailable:   2048 kB\n";
        assert_eq!(mem_available(meminfo), Some(2048 * 1024));
        assert_eq!(mem_available("MemTotal: 5 kB\n"), None);
        assert_eq!(mem_available("MemAvailable: lots kB\n"), None);
    }

    #[test]
    fn cgroup_limits_of_both_versions() {
        let root = tempfile::tempdir().unwrap();
        let v1 = root.path().join("memory/jobs/a");
        std::fs::create_dir_all(&v1).unwrap();
        std::fs::write(v1.join("memory.limit_in_bytes"), "4294967296\n").unwrap();
        let v1_text = "9:name=systemd:/\n4:memory:/jobs/a\n0::/\n";
        assert_eq!(cgroup_limit(v1_text, root.path()), Some(4 << 30));
        std::fs::write(v1.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        assert_eq!(cgroup_limit(v1_text, root.path()), None, "v1 without a limit");
        let v2 = root.path().join("user.slice/b");
        std::fs::create_dir_all(&v2).unwrap();
        std::fs::write(v2.join("memory.max"), "1073741824\n").unwrap();
        assert_eq!(cgroup_limit("0::/user.slice/b\n", root.path()), Some(1 << 30));
        std::fs::write(v2.join("memory.max"), "max\n").unwrap();
        assert_eq!(cgroup_limit("0::/user.slice/b\n", root.path()), None, "v2 without a limit");
        assert_eq!(cgroup_limit("0::/nowhere\n", root.path()), None);
        // A limit set above the cgroup, or its memory.high, counts.
        std::fs::write(root.path().join("user.slice/memory.max"), "3221225472\n").unwrap();
        assert_eq!(cgroup_limit("0::/user.slice/b\n", root.path()), Some(3 << 30), "a parent's memory.max");
        std::fs::write(v2.join("memory.high"), "2147483648\n").unwrap();
        assert_eq!(cgroup_limit("0::/user.slice/b\n", root.path()), Some(2 << 30), "its memory.high");
        // v1: the hierarchy's least limit, from memory.stat.
        std::fs::write(v1.join("memory.stat"), "cache 0\nhierarchical_memory_limit 1073741824\nrss 5\n").unwrap();
        assert_eq!(cgroup_limit(v1_text, root.path()), Some(1 << 30), "v1 under a limited parent");
    }

    #[test]
    fn only_an_index_larger_than_memory_bounds_the_join() {
        let least = super::super::Searcher::LEAST_MAPPED;
        assert_eq!(join_mapped(7 << 30, || Some(24 << 30)), None);
        assert_eq!(join_mapped(7 << 30, || Some(4 << 30)), Some(2 << 30));
        assert_eq!(join_mapped(7 << 30, || None), None, "unknown memory: the join as it is");
        assert_eq!(join_mapped(1 << 30, || Some(1 << 20)), Some(least));
        // An index within the least bound: the memory is not asked for.
        let asked = std::cell::Cell::new(0);
        let tiny = || {
            asked.set(asked.get() + 1);
            Some(1 << 10)
        };
        assert_eq!(join_mapped(least as u64, tiny), None);
        assert_eq!(asked.get(), 0);
        assert_eq!(join_mapped(least as u64 + 1, tiny), Some(least), "one byte more: bounded");
        assert_eq!(asked.get(), 1);
    }
}
