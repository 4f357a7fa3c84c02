//! The access log file (`--access-log FILE`): one JSON line per request,
//! appended, and reopened by name on SIGHUP so that logrotate can move it
//! away (`postrotate` sends the signal; the next line goes to a new file).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// The open access log; clones share the file.
#[derive(Clone)]
pub struct AccessLogFile {
    path: PathBuf,
    file: Arc<Mutex<File>>,
}

impl AccessLogFile {
    /// Opens `path` for appending, creating it.
    ///
    /// Errors: the file cannot be opened (the message names it).
    pub fn open(path: &Path) -> Result<AccessLogFile, String> {
        Ok(AccessLogFile { path: path.to_path_buf(), file: Arc::new(Mutex::new(append(path)?)) })
    }

    /// Opens the file by its name again: lines from now on go to whatever
    /// is at the path (a new file once logrotate moved the old one away).
    /// On failure the file in use stays.
    ///
    /// Errors: the file cannot be opened (the message names it).
    pub fn reopen(&self) -> Result<(), String> {
        let new = append(&self.path)?;
        *self.file.lock().unwrap_or_else(|e| e.into_inner()) = new;
        Ok(())
    }
}

fn append(path: &Path) -> Result<File, String> {
    OpenOptions::new().create(true).append(true).open(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// One line's writer: the file, locked while the line is written.
pub struct LineWriter<'a>(MutexGuard<'a, File>);

impl Write for LineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for AccessLogFile {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter(self.file.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::fmt::MakeWriter;

    #[test]
    fn a_moved_file_is_replaced_on_reopen() {
        let dir = std::env::temp_dir().join(format!("smbgate-access-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("access.log");
        let log = AccessLogFile::open(&path).unwrap();
        log.make_writer().write_all(b"one\n").unwrap();
        std::fs::rename(&path, dir.join("access.log.1")).unwrap();
        log.make_writer().write_all(b"two\n").unwrap();
        log.reopen().unwrap();
        log.make_writer().write_all(b"three\n").unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("access.log.1")).unwrap(), "one\ntwo\n");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "three\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
