//! `larch replay --record-regular FILE`: a streamed replay's regular blocks written as a larch
//! trace. The trace is written to `FILE.partial` and renamed to `FILE` once complete, so that a
//! replay that fails or is interrupted leaves no unfinished trace under `FILE` (one killed outright
//! leaves `FILE.partial`), and an earlier trace at `FILE` is replaced only by a complete one.

use anyhow::Context;
use larch_bench::GenParams;
use larch_trace::format::{BoxedSink, create_trace};
use larch_trace::{OpSink, TraceFormat};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A trace of regular blocks being written.
pub struct RegularRecording {
    /// Where the complete trace goes.
    path: PathBuf,
    /// Where it is written until then.
    partial: PathBuf,
    sink: BoxedSink,
}

impl RegularRecording {
    /// Starts the trace of the regular blocks of `params`' streamed replay, bound for `path`.
    pub fn create(path: &Path, params: &GenParams) -> anyhow::Result<RegularRecording> {
        let mut metadata = crate::cmd_trace::trace_metadata(params);
        metadata.push(("part".into(), "regular blocks, onto the setup's store (--onto-store)".into()));
        let mut name = OsString::from(path.as_os_str());
        name.push(".partial");
        let partial = PathBuf::from(name);
        let sink = create_trace(&partial, TraceFormat::Larch, &metadata)
            .with_context(|| format!("creating {}", partial.display()))?;
        crate::interrupt::remove_on_interrupt(&partial);
        Ok(RegularRecording { path: path.to_path_buf(), partial, sink })
    }

    /// Where the trace goes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The writer the replay records into.
    pub fn sink(&mut self) -> &mut dyn OpSink {
        self.sink.as_mut()
    }

    /// Completes the trace (the replay succeeded) and moves it to its path.
    pub fn complete(mut self) -> anyhow::Result<()> {
        self.sink.finish().with_context(|| format!("writing {}", self.partial.display()))?;
        std::fs::rename(&self.partial, &self.path)
            .with_context(|| format!("renaming {} to {}", self.partial.display(), self.path.display()))?;
        crate::interrupt::keep(&self.partial);
        Ok(())
    }

    /// Removes the unfinished trace (the replay failed).
    pub fn abandon(self) {
        let _ = std::fs::remove_file(&self.partial);
        crate::interrupt::keep(&self.partial);
    }
}
