//! Keeping a long-running gateway's memory flat under glibc's malloc.
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
