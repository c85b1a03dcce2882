//! Samples of the process: CPU time and peak RSS (`getrusage`), current RSS (`/proc/self/statm`),
//! I/O counters (`/proc/self/io`). Every figure is optional: what the platform does not offer is
//! `None`, never an error.

use serde::{Deserialize, Serialize};

/// The I/O counters of `/proc/self/io` (Linux), all cumulative for the process, or a difference
/// of two samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoCounters {
    /// Bytes passed to `read`-like calls (`rchar`), whether served from the page cache or not.
    pub rchar: u64,
    /// Bytes passed to `write`-like calls (`wchar`).
    pub wchar: u64,
    /// Number of read calls (`syscr`).
    pub syscr: u64,
    /// Number of write calls (`syscw`).
    pub syscw: u64,
    /// Bytes actually fetched from storage (`read_bytes`).
    pub read_bytes: u64,
    /// Bytes sent to storage (`write_bytes`; counted when dirty pages are flushed).
    pub write_bytes: u64,
}

impl IoCounters {
    /// `self - earlier`, field by field (saturating, in case a counter went backwards).
    pub fn since(&self, earlier: &IoCounters) -> IoCounters {
        IoCounters {
            rchar: self.rchar.saturating_sub(earlier.rchar),
            wchar: self.wchar.saturating_sub(earlier.wchar),
            syscr: self.syscr.saturating_sub(earlier.syscr),
            syscw: self.syscw.saturating_sub(earlier.syscw),
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
        }
    }

    /// Field-by-field sum.
    pub fn plus(&self, other: &IoCounters) -> IoCounters {
        IoCounters {
            rchar: self.rchar + other.rchar,
            wchar: self.wchar + other.wchar,
            syscr: self.syscr + other.syscr,
            syscw: self.syscw + other.syscw,
            read_bytes: self.read_bytes + other.read_bytes,
            write_bytes: self.write_bytes + other.write_bytes,
        }
    }

    /// Parses the text of `/proc/self/io`; `None` if a field is missing.
    pub fn parse(text: &str) -> Option<IoCounters> {
        let mut fields = [None; 6];
        for line in text.lines() {
            let Some((name, value)) = line.split_once(':') else { continue };
            let slot = match name.trim() {
                "rchar" => 0,
                "wchar" => 1,
                "syscr" => 2,
                "syscw" => 3,
                "read_bytes" => 4,
                "write_bytes" => 5,
                _ => continue,
            };
            fields[slot] = value.trim().parse::<u64>().ok();
        }
        let [rchar, wchar, syscr, syscw, read_bytes, write_bytes] = fields;
        Some(IoCounters {
            rchar: rchar?,
            wchar: wchar?,
            syscr: syscr?,
            syscw: syscw?,
            read_bytes: read_bytes?,
            write_bytes: write_bytes?,
        })
    }

    /// The current counters of this process (`None` where `/proc/self/io` is absent or unreadable).
    pub fn current() -> Option<IoCounters> {
        std::fs::read_to_string("/proc/self/io").ok().and_then(|text| IoCounters::parse(&text))
    }
}

/// One sample of the process's resources.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcessSample {
    /// User + system CPU time of the process (all threads), in seconds.
    pub cpu_s: Option<f64>,
    /// Peak resident set size so far, in bytes (`VmHWM` of `/proc/self/status`, which
    /// [`reset_peak_rss`] resets, else `ru_maxrss`).
    pub max_rss_bytes: Option<u64>,
    /// Current resident set size, in bytes.
    pub rss_bytes: Option<u64>,
    /// Cumulative I/O counters.
    pub io: Option<IoCounters>,
    /// Page faults of the process so far, minor and major (`ru_minflt + ru_majflt`): a first
    /// touch of memory new to the process, or of a mapped file's page, each.
    pub page_faults: Option<u64>,
}

impl ProcessSample {
    /// Samples the process now: one `getrusage` call and two small `/proc` reads.
    pub fn now() -> ProcessSample {
        let (cpu_s, max_rss_bytes, page_faults) = match rusage() {
            Some(usage) => (Some(usage.cpu_s), Some(usage.max_rss_bytes), Some(usage.page_faults)),
            None => (None, None, None),
        };
        ProcessSample {
            cpu_s,
            max_rss_bytes: peak_rss_bytes().or(max_rss_bytes),
            rss_bytes: current_rss_bytes(),
            io: IoCounters::current(),
            page_faults,
        }
    }
}

/// What `getrusage` says of this process.
#[cfg_attr(not(unix), allow(dead_code))]
struct Usage {
    /// CPU seconds, user + system.
    cpu_s: f64,
    /// Peak RSS in bytes.
    max_rss_bytes: u64,
    /// Minor and major page faults.
    page_faults: u64,
}

/// CPU seconds (user + system), peak RSS in bytes and page faults of this process.
#[cfg(unix)]
fn rusage() -> Option<Usage> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` points to writable memory of the size of `rusage`, which getrusage fills
    // on success; RUSAGE_SELF is a valid `who`.
    let code = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if code != 0 {
        return None;
    }
    // SAFETY: getrusage returned 0, so it initialised the structure (and it was zeroed before).
    let usage = unsafe { usage.assume_init() };
    let seconds = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    let cpu = seconds(usage.ru_utime) + seconds(usage.ru_stime);
    // Linux reports ru_maxrss in KiB, macOS in bytes.
    let max_rss = u64::try_from(usage.ru_maxrss).unwrap_or(0);
    let max_rss = if cfg!(target_os = "macos") { max_rss } else { max_rss * 1024 };
    let faults = u64::try_from(usage.ru_minflt).unwrap_or(0) + u64::try_from(usage.ru_majflt).unwrap_or(0);
    Some(Usage { cpu_s: cpu, max_rss_bytes: max_rss, page_faults: faults })
}

#[cfg(not(unix))]
fn rusage() -> Option<Usage> {
    None
}

/// Current RSS in bytes, from the second field of `/proc/self/statm` (in pages).
/// The peak resident set size (`VmHWM`), in bytes.
fn peak_rss_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Resets the process's peak resident set size to its current one (`5` written to
/// `/proc/self/clear_refs`), so that later samples' `max_rss_bytes` is the peak of what follows
/// (a streamed replay's regular blocks after its setup). Whether it could.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", b"5").is_ok()
}

fn current_rss_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_size()?)
}

#[cfg(unix)]
fn page_size() -> Option<u64> {
    // SAFETY: sysconf has no memory-safety preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|size| *size > 0)
}

#[cfg(not(unix))]
fn page_size() -> Option<u64> {
    None
}

/// Bytes of the regular files directly in `dir` (not below its sub-directories), from their
/// metadata alone: one `statx` per entry, no file opened. An entry removed between the listing and
/// its `statx` (a GC deleting its files meanwhile) counts 0; symbolic links are not followed.
/// `Err` when `dir` cannot be listed (`NotFound` when it does not exist) or an entry's metadata
/// cannot be read.
pub fn dir_bytes(dir: &std::path::Path) -> std::io::Result<u64> {
    let mut total = 0u64;
    for entry in std::fs::read_dir(dir)? {
        match entry.and_then(|entry| entry.metadata()) {
            Ok(metadata) if metadata.is_file() => total = total.saturating_add(metadata.len()),
            Ok(_) => {}
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(err),
        }
    }
    Ok(total)
}

/// The machine's host name (`/proc/sys/kernel/hostname`, else `$HOSTNAME`, else `unknown`).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".to_string())
}

/// Formats Unix seconds as an RFC 3339 UTC timestamp, e.g. `2026-11-22T05:00:00Z`.
pub fn format_utc(unix_seconds: f64) -> String {
    larch_core::schema::rfc3339_utc(unix_seconds.floor() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_bytes_sums_the_files_directly_inside() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("store");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("a"), [0u8; 100]).unwrap();
        std::fs::write(dir.join("b"), [0u8; 23]).unwrap();
        std::fs::write(dir.join("sub").join("c"), [0u8; 1000]).unwrap();
        assert_eq!(dir_bytes(&dir).unwrap(), 123);
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.join("sub").join("c"), dir.join("link")).unwrap();
            assert_eq!(dir_bytes(&dir).unwrap(), 123, "links are not followed");
        }
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(dir_bytes(&dir).unwrap_err().kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn parses_proc_io() {
        let text = "rchar: 10\nwchar: 20\nsyscr: 3\nsyscw: 4\nread_bytes: 4096\nwrite_bytes: 8192\n\
                    cancelled_write_bytes: 0\n";
        let io = IoCounters::parse(text).unwrap();
        assert_eq!(io.wchar, 20);
        assert_eq!(io.write_bytes, 8192);
        assert!(IoCounters::parse("rchar: 10\n").is_none());
    }

    #[test]
    fn formats_utc() {
        assert_eq!(format_utc(0.0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(1_530_374_852.0), "2018-06-30T16:07:32Z");
        assert_eq!(format_utc(951_782_400.0), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn samples_something_on_linux() {
        let sample = ProcessSample::now();
        if cfg!(target_os = "linux") {
            assert!(sample.cpu_s.is_some());
            assert!(sample.rss_bytes.unwrap() > 0);
            assert!(sample.max_rss_bytes.unwrap() >= 1024);
        }
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn counts_the_page_faults_of_new_memory() {
        const LEN: usize = 16 << 20;
        // A fresh anonymous mapping (not the allocator's, which may hand back memory touched
        // before): never touched, so each first write to a page faults.
        // SAFETY: a private anonymous mapping with no address hint; the result is checked.
        let area = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(area, libc::MAP_FAILED);
        let before = ProcessSample::now().page_faults.unwrap();
        for page in (0..LEN).step_by(4096) {
            // SAFETY: `page` is within the LEN bytes just mapped readable and writable.
            unsafe { area.cast::<u8>().add(page).write_volatile(1) };
        }
        let after = ProcessSample::now().page_faults.unwrap();
        // SAFETY: unmaps exactly the mapping made above, no longer used.
        unsafe { libc::munmap(area, LEN) };
        // At least one fault per 2 MiB huge page, 4,096 with 4 KiB pages.
        assert!(after >= before + 8, "{before} -> {after} page faults");
    }
}
