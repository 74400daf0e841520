//! [`FileWatcher`]: a configuration file reapplied when it changes, debounced; a bad edit is
//! logged and the configuration in force stays.

use std::fmt;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::time::Duration;

use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Instant;

use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};

use super::{Changes, DocumentError};
use crate::registry::Registry;

/// Reapplies a configuration file to a registry whenever the file changes (feature `watch`).
/// Dropping it stops watching.
///
/// Editors save in different ways (in place, or a new file renamed over the old one), so the
/// file's directory is watched and the events of this file, collected over the debounce
/// period, trigger one reload. A reload that fails changes nothing: the error is logged (at
/// `WARN`, target `resilience`) and given to the callback, and the configuration in force
/// stays until a later edit is valid. A reload that succeeds is logged at `INFO` with what
/// changed.
///
/// ```no_run
/// use std::time::Duration;
/// use resilience_runtime::{document::FileWatcher, Registry};
///
/// let registry = Registry::global();
/// registry.load_file("config/resilience.toml")?;
/// let _watcher = FileWatcher::start(registry, "config/resilience.toml", Duration::from_millis(500))?;
/// // … serve; edits of the file apply within half a second of the last write.
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct FileWatcher {
    path: PathBuf,
    /// Dropped first: its event channel closes, and the thread ends.
    watcher: Option<RecommendedWatcher>,
    thread: Option<JoinHandle<()>>,
}

impl FileWatcher {
    /// Watches `path` and reapplies it to `registry` (`Registry::global()`, or an
    /// `Arc<Registry>`) once no change has come for `debounce`. It does not load the file
    /// first: load it at startup, where a bad file should stop the service.
    ///
    /// # Errors
    ///
    /// A [`DocumentError`] naming the file if its directory cannot be watched.
    pub fn start<R>(
        registry: R,
        path: impl AsRef<Path>,
        debounce: Duration,
    ) -> Result<FileWatcher, DocumentError>
    where
        R: Deref<Target = Registry> + Send + 'static,
    {
        FileWatcher::start_with(registry, path, debounce, |_| {})
    }

    /// [`start`](Self::start), calling `on_reload` with the outcome of every reload (after it
    /// is logged): what changed, or why the file was refused.
    ///
    /// # Errors
    ///
    /// A [`DocumentError`] naming the file if its directory cannot be watched.
    pub fn start_with<R>(
        registry: R,
        path: impl AsRef<Path>,
        debounce: Duration,
        mut on_reload: impl FnMut(Result<&Changes, &DocumentError>) + Send + 'static,
    ) -> Result<FileWatcher, DocumentError>
    where
        R: Deref<Target = Registry> + Send + 'static,
    {
        let path = path.as_ref().to_owned();
        let watched = absolute(&path);
        let directory = watched
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_owned);
        let (events, received) = channel();
        let cannot = |e: notify::Error| {
            DocumentError::io(
                &path,
                std::io::Error::other(format!(
                    "cannot watch {} for changes: {e}",
                    directory.display()
                )),
            )
        };
        let mut watcher = notify::recommended_watcher(events).map_err(cannot)?;
        watcher
            .watch(&directory, RecursiveMode::NonRecursive)
            .map_err(cannot)?;
        let file = path.clone();
        let thread = std::thread::Builder::new()
            .name("resilience-watch".into())
            .spawn(move || {
                while wait_for_change(&received, &watched, debounce) {
                    match registry.load_file(&file) {
                        Ok(changes) => {
                            if !changes.is_empty() {
                                tracing::info!(
                                    target: "resilience",
                                    file = %file.display(),
                                    "reloaded {}: {}",
                                    file.display(),
                                    changes.to_string().replace('\n', "; ")
                                );
                            }
                            on_reload(Ok(&changes));
                        }
                        Err(error) => {
                            tracing::warn!(
                                target: "resilience",
                                file = %file.display(),
                                "{error}; the configuration in force stays"
                            );
                            on_reload(Err(&error));
                        }
                    }
                }
            })
            .map_err(|e| DocumentError::io(&path, e))?;
        Ok(FileWatcher {
            path,
            watcher: Some(watcher),
            thread: Some(thread),
        })
    }

    /// The file watched.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for FileWatcher {
    fn drop(&mut self) {
        // Closing the channel ends the thread once a reload in progress returns.
        drop(self.watcher.take());
        if let Some(thread) = self.thread.take() {
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

/// Waits for a change of the file `watched` and then for `debounce` without one (an editor's
/// save is several events); `false` once the watcher is gone.
///
/// By hand rather than with `notify-debouncer-mini`: that debouncer drops the events' kinds,
/// and the file's own reads (the reload opens it) are events of inotify, so it would reload
/// forever. Here opening and closing without writing are not changes.
fn wait_for_change(
    events: &Receiver<notify::Result<Event>>,
    watched: &Path,
    debounce: Duration,
) -> bool {
    let changes = |event: &notify::Result<Event>| match event {
        Ok(event) => {
            !matches!(
                event.kind,
                EventKind::Access(
                    notify::event::AccessKind::Open(_)
                        | notify::event::AccessKind::Read
                        | notify::event::AccessKind::Close(notify::event::AccessMode::Read)
                        | notify::event::AccessKind::Close(notify::event::AccessMode::Execute)
                )
            ) && event.paths.iter().any(|p| absolute(p) == watched)
        }
        // The watcher's own trouble (an overflowed queue): the file may have changed.
        Err(_) => true,
    };
    loop {
        match events.recv() {
            Ok(event) if changes(&event) => break,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    let mut quiet_from = Instant::now() + debounce;
    loop {
        let left = quiet_from.saturating_duration_since(Instant::now());
        match events.recv_timeout(left) {
            Ok(event) if changes(&event) => quiet_from = Instant::now() + debounce,
            Ok(_) => {}
            Err(RecvTimeoutError::Timeout) => return true,
            Err(RecvTimeoutError::Disconnected) => return false,
        }
    }
}

impl fmt::Debug for FileWatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileWatcher")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// `path` made absolute against the current directory, without touching the file system
/// beyond that (the file may be gone for a moment while an editor replaces it).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}
