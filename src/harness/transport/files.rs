//! Report files that are never half-written: each is written beside its destination under a
//! temporary name and renamed into place, so that a run killed at any moment (SIGKILL) leaves
//! the previous file or none, never an empty or truncated one.

use crate::harness::vocab::errors::ReportWriteError;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Why `path` cannot be written, naming it.
fn error(path: &Path, source: std::io::Error) -> ReportWriteError {
    ReportWriteError { path: path.display().to_string(), source }
}

/// The temporary file beside `path`: `.NAME.PID.tmp`, in the same folder (a rename never
/// crosses file systems), hidden, and this process's own.
fn temporary(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

/// Removes the temporary files beside `path` that processes no longer running left (killed
/// while writing).
fn sweep(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else { return };
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(pid) = file
            .to_str()
            .and_then(|f| f.strip_prefix(&format!(".{name}.")))
            .and_then(|rest| rest.strip_suffix(".tmp"))
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether `path` is `-`: standard output (`--report-json -`), as `check-events -` reads
/// standard input.
pub(crate) fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Writes `text` to `path` whole: a temporary file beside it, synced, then renamed into place
/// (temporaries that killed runs left beside it go first); `-` writes it to standard output.
pub(crate) fn write_atomically(path: &Path, text: &[u8]) -> Result<(), ReportWriteError> {
    if is_stdout(path) {
        let mut out = std::io::stdout().lock();
        return out.write_all(text).and_then(|()| out.flush()).map_err(|e| error(path, e));
    }
    sweep(path);
    let temp = temporary(path);
    let written = std::fs::File::create(&temp)
        .and_then(|mut f| f.write_all(text).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&temp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written.map_err(|e| error(path, e))
}

/// Whether `path` can be written, without creating or changing it: an existing file must open
/// for writing, and a new one's folder must take a file (tried with the temporary name).
pub(crate) fn writable(path: &Path) -> Result<(), ReportWriteError> {
    if is_stdout(path) {
        return Ok(());
    }
    if path.exists() {
        return std::fs::OpenOptions::new().append(true).open(path).map(drop).map_err(|e| error(path, e));
    }
    let temp = temporary(path);
    std::fs::File::create(&temp).map_err(|e| error(path, e))?;
    let _ = std::fs::remove_file(&temp);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_replaced_whole_and_a_check_creates_nothing() {
        let dir = std::env::temp_dir().join(format!("bankconf-files-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("report.json");
        let _ = std::fs::remove_file(&path);
        writable(&path).unwrap();
        assert!(!path.exists(), "checking created the file");
        write_atomically(&path, b"first").unwrap();
        write_atomically(&path, b"second").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "second");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "a temporary file is left");
        assert!(writable(&dir.join("missing/report.json")).is_err());
        // A killed writer's temporary (no process has a pid above 2^22) goes; another file stays.
        std::fs::write(dir.join(".report.json.99999999.tmp"), "half").unwrap();
        std::fs::write(dir.join(".other.json.99999999.tmp"), "not ours").unwrap();
        write_atomically(&path, b"third").unwrap();
        assert!(!dir.join(".report.json.99999999.tmp").exists());
        assert!(dir.join(".other.json.99999999.tmp").exists());
        std::fs::remove_file(dir.join(".other.json.99999999.tmp")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
