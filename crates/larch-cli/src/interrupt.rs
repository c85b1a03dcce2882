//! Cleanup on SIGINT, SIGTERM and SIGHUP: a replay that dies by a signal it can catch removes the
//! store (and temporary directories) it created, so that no partial store looks like a complete
//! one. The handler runs on its own thread (the `ctrlc` crate), removes the registered paths and
//! exits with 130.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

static PATHS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static INSTALL: Once = Once::new();

/// Removes `path` (a directory or a file this process created) if the process is interrupted.
pub fn remove_on_interrupt(path: &Path) {
    INSTALL.call_once(|| {
        let installed = ctrlc::set_handler(|| {
            let paths = PATHS.lock().map(|paths| paths.clone()).unwrap_or_default();
            for path in paths {
                if std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path)).is_ok() {
                    eprintln!("\nlarch: interrupted: removed {}", path.display());
                }
            }
            std::process::exit(130);
        });
        if let Err(e) = installed {
            eprintln!("larch: warning: cannot clean up on interrupt: {e}");
        }
    });
    if let Ok(mut paths) = PATHS.lock() {
        paths.push(path.to_path_buf());
    }
}

/// Keeps `path` if the process is interrupted from now on (the replay finished).
pub fn keep(path: &Path) {
    if let Ok(mut paths) = PATHS.lock() {
        paths.retain(|registered| registered != path);
    }
}
