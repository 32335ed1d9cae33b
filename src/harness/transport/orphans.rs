//! No orphans: the browser and the driver's process groups die with the harness, however it
//! ends, SIGKILL included (which no code of ours sees). A small supervisor, `sh` in a process
//! group of its own (so that a terminal's Ctrl-C does not reach it), reads what to kill from a
//! socket whose other end only this process holds. When this process ends, by any means, the
//! kernel closes that end: the supervisor reads end-of-file, kills what is still watched and
//! removes the folders it was given (the browser's profile), then exits.
//!
//! One supervisor per process, started on the first [`watch`]; without `sh` there is none, and
//! only the in-process cleanup (drops, [`kill_now`]) remains.

use std::collections::BTreeSet;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// The supervisor: `k ID` watches a kill(2) target (a negative ID is a process group), `u ID`
/// stops watching it, `r PATH` is removed at the end. It ignores the signals a terminal or a
/// CI runner sends the harness: it must outlive it, and it ends by itself at end-of-file. Then
/// it kills what is still watched, waits (up to 2 s) until that has ended, so that no dying
/// browser writes into its profile while it goes, and removes the folders, trying again (up to
/// 2 s) while one is still there.
const SCRIPT: &str = r#"trap '' INT TERM HUP QUIT PIPE
ids=' '
set --
while IFS= read -r line; do
  arg=${line#* }
  case $line in
    k\ *) ids="$ids$arg " ;;
    u\ *) case $ids in *" $arg "*) ids="${ids%% $arg *} ${ids#* $arg }" ;; esac ;;
    r\ *) set -- "$@" "$arg" ;;
  esac
done
if [ "$ids" != ' ' ]; then
  for id in $ids; do kill -9 $id 2>/dev/null; done
  n=0
  while [ $n -lt 20 ]; do
    alive=
    for id in $ids; do kill -0 $id 2>/dev/null && alive=1; done
    [ -z "$alive" ] && break
    sleep 0.1; n=$((n + 1))
  done
fi
for path in "$@"; do
  n=0
  while [ -e "$path" ] && [ $n -lt 20 ]; do rm -rf "$path" 2>/dev/null || sleep 0.1; n=$((n + 1)); done
done
"#;

/// What this process watches, and its end of the supervisor's socket.
struct Watched {
    ids: BTreeSet<i32>,
    paths: Vec<PathBuf>,
    /// `None` until started; `Some(None)` when it could not be.
    supervisor: Option<Option<UnixStream>>,
}

static WATCHED: Mutex<Watched> = Mutex::new(Watched { ids: BTreeSet::new(), paths: Vec::new(), supervisor: None });

fn watched() -> std::sync::MutexGuard<'static, Watched> {
    WATCHED.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts the supervisor; `None` if it cannot be (no `sh`).
fn start() -> Option<UnixStream> {
    let (ours, theirs) = UnixStream::pair().ok()?;
    let child = Command::new("sh")
        .arg("-c")
        .arg(SCRIPT)
        .arg("bankconf-supervisor")
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .ok()?;
    // Never waited for: it ends after this process does.
    drop(child);
    Some(ours)
}

impl Watched {
    /// Tells the supervisor one line. A supervisor gone is not an error (and no SIGPIPE).
    fn tell(&mut self, line: &str) {
        let socket = self.supervisor.get_or_insert_with(start);
        if let Some(socket) = socket {
            let text = format!("{line}\n");
            // SAFETY: sends from a buffer we own on a socket we own; MSG_NOSIGNAL: no SIGPIPE.
            unsafe { libc::send(socket.as_raw_fd(), text.as_ptr().cast(), text.len(), libc::MSG_NOSIGNAL) };
        }
    }
}

/// Kills `id` (a kill(2) target: a process, or a process group as its negative id) if this
/// process ends while it is watched.
pub(crate) fn watch(id: i32) {
    let mut w = watched();
    if id != 0 && id != -1 && w.ids.insert(id) {
        w.tell(&format!("k {id}"));
    }
}

/// Stops watching `id`: it has ended (a reaped id may soon name another process).
pub(crate) fn unwatch(id: i32) {
    let mut w = watched();
    if w.ids.remove(&id) {
        w.tell(&format!("u {id}"));
    }
}

/// Removes `path` when this process ends, if it is still there.
pub(crate) fn remove_at_exit(path: &Path) {
    let mut w = watched();
    w.paths.push(path.to_path_buf());
    w.tell(&format!("r {}", path.display()));
}

/// Kills everything watched now, and removes the folders given (a second signal ends the
/// process at once, without leaving children).
pub(crate) fn kill_now() {
    let mut w = watched();
    for id in std::mem::take(&mut w.ids) {
        // SAFETY: kill(2) on a process or group this process started and still watches.
        unsafe { libc::kill(id, libc::SIGKILL) };
    }
    for path in &w.paths {
        let _ = std::fs::remove_dir_all(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn the_script_forgets_what_it_is_told_to() {
        // The supervisor's bookkeeping alone, fed a script and ended at end-of-file: it kills
        // only what is still watched (here: echo instead of kill).
        let script = SCRIPT.replace("kill -9 $id 2>/dev/null", "echo $id").replace("kill -0 $id", "false");
        let mut child =
            Command::new("sh").arg("-c").arg(script).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        child.stdin.take().unwrap().write_all(b"k -12\nk 13\nk -14\nu 13\nu -12\nk 15\n").unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "-14\n15\n");
    }
}
