//! Keeping a long-running gateway's memory flat under glibc's malloc, and knowing how much
//! memory the machine gives it ([`limit`]).
//!
//! glibc keeps memory that the program freed: in per-thread arenas that, once grown, stay grown,
//! and in free chunks between live ones, which it hands back to the kernel only at the top of the
//! heap. A refresh allocates hundreds of megabytes on its own thread while every worker thread
//! answers requests; without the two calls below, what the gateway held after each swap crept up
//! from one refresh to the next (benches/load). Both are glibc's own knobs, which no crate wraps,
//! hence the two small `unsafe` calls. Other allocators (musl) need neither: they compile to
//! nothing.

/// Caps glibc's malloc at two arenas. By default glibc gives each thread that allocates under
/// contention an arena of its own: under load, the residue after each swap grew (307, 305, 312,
/// then 370 MiB); with two arenas throughput is unchanged. mimalloc was tried instead: flat as
/// well, but a harvest of a million records then peaked 20-70% higher. `MALLOC_ARENA_MAX` in the
/// environment still wins. Call it first in `main`, before any other thread exists.
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: `mallopt` only sets a malloc parameter; the caller runs it before any other
        // thread exists.
        #[allow(unsafe_code)]
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}

/// Hands the free memory of every arena back to the kernel (`malloc_trim(0)`), not only the top
/// of each heap. The gateway calls it after a refresh, when what the harvest and the render
/// allocated has been freed: with two arenas alone, the residue after each swap still stepped
/// up from one refresh to the next (207, then 242 MiB). It takes a few milliseconds, during which
/// allocations in the arena being trimmed wait, so it runs off the request workers.
pub(crate) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes each arena's lock itself; it frees no memory that is in use.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The memory the process may use, and what says so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Limit {
    /// Bytes.
    pub(crate) bytes: u64,
    /// Where the figure comes from, in words (a cgroup's `memory.max`, or the machine's).
    pub(crate) source: String,
}

/// The memory this process may use: the smallest limit of its cgroup and those above it
/// (cgroup v2's `memory.max`, what systemd's `MemoryMax=` and a container's memory limit set;
/// cgroup v1's `memory.limit_in_bytes`), or else the machine's memory (`MemTotal`). `None` where
/// neither can be read (not Linux).
pub(crate) fn limit() -> Option<Limit> {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| mem_total(&text))?;
    let mut least = Limit {
        bytes: total,
        source: "the machine's memory (MemTotal, /proc/meminfo)".to_owned(),
    };
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    if let Some(path) = own.lines().find_map(|l| l.strip_prefix("0::")) {
        // The process's cgroup and each above it, up to the root of the hierarchy (which,
        // in a container, is the container's own).
        let mut dir = std::path::Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
        loop {
            files.push(dir.join("memory.max"));
            if dir == std::path::Path::new("/sys/fs/cgroup") || !dir.pop() {
                break;
            }
        }
    }
    files.push("/sys/fs/cgroup/memory/memory.limit_in_bytes".into());
    for file in files {
        let Some(bytes) = std::fs::read_to_string(&file)
            .ok()
            .and_then(|text| cgroup_max(&text))
        else {
            continue;
        };
        if bytes < least.bytes {
            least = Limit {
                bytes,
                source: format!("its cgroup's memory limit ({})", file.display()),
            };
        }
    }
    Some(least)
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// A cgroup's memory limit in bytes; `None` for `max` (none), or what cannot be read.
fn cgroup_max(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The figures are read as the kernel writes them.
    #[test]
    fn limits_are_read_as_the_kernel_writes_them() {
        let meminfo = "MemTotal:       24732120 kB\nMemFree:         4169044 kB\n";
        assert_eq!(mem_total(meminfo), Some(24_732_120 * 1024));
        assert_eq!(mem_total("MemFree: 1 kB\n"), None);
        assert_eq!(cgroup_max("max\n"), None);
        assert_eq!(cgroup_max("536870912\n"), Some(512 << 20));
        let here = limit().expect("Linux says");
        assert!(here.bytes > 0, "{here:?}");
    }
}
