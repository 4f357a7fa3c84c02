//! Secret files (passwords, secret keys, tokens; keytabs and the TLS key,
//! which their own readers read): read as their first line, and held to
//! their permission bits, as ssh holds a private key: a file every user may read or change is refused when the gateway
//! runs as root, and warned about otherwise.

use std::path::PathBuf;

/// Set by `config check --without-secrets`: secret files are named, never
/// opened, for the life of the process.
static SECRET_FILES_UNREAD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// What a secret file stands for once [`leave_secret_files_unread`] is on.
pub const UNREAD_SECRET: &str = "(secret file not read)";

/// From now on, no secret file is opened: each stands for [`UNREAD_SECRET`].
/// Only `config check --without-secrets` calls it; the process then exits.
pub fn leave_secret_files_unread() {
    SECRET_FILES_UNREAD.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// True once [`leave_secret_files_unread`] was called.
pub fn secret_files_unread() -> bool {
    SECRET_FILES_UNREAD.load(std::sync::atomic::Ordering::Relaxed)
}

/// The first line of the secret file `path` (its whole secret). A file
/// every user of the machine may read or change is refused when the
/// gateway runs as root, as ssh refuses such a private key, and warned
/// about otherwise; a group may read it (the deployment's 0640 files).
///
/// Errors: the file cannot be read, or is refused for its mode.
pub fn read_secret_file(path: &std::path::Path) -> std::io::Result<String> {
    if secret_files_unread() {
        return Ok(UNREAD_SECRET.to_string());
    }
    let text = std::fs::read_to_string(path)?;
    check_secret_mode(path)?;
    Ok(text.lines().next().unwrap_or("").to_string())
}

/// The permission bits of the file at `path` if every user of the machine
/// may read or change it (any `o` bit), as `0o644` say; `None` otherwise,
/// or if it cannot be looked at.
pub fn open_to_everyone(path: &std::path::Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o007 != 0).then_some(mode)
}

/// Checks a secret file read whole by its own reader (a Kerberos keytab,
/// the TLS key): it can be opened, and is refused (as root) or warned
/// about if every user may read it, as [`read_secret_file`] holds the
/// others. Skipped by `config check --without-secrets`.
///
/// Errors: one line naming `setting` (`--smb-keytab`, `TLS key`), the
/// file and why.
pub fn check_secret_file(setting: &str, path: &std::path::Path) -> Result<(), String> {
    if secret_files_unread() {
        return Ok(());
    }
    std::fs::File::open(path)
        .and_then(|_| check_secret_mode(path))
        .map_err(|e| format!("{setting} {}: {e}", path.display()))
}

/// See [`read_secret_file`].
fn check_secret_mode(path: &std::path::Path) -> std::io::Result<()> {
    let Some(mode) = open_to_everyone(path) else { return Ok(()) };
    if rustix::process::geteuid().is_root() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "refused, since every user may read or change it (mode {mode:03o}) and the gateway runs as root; chmod o-rwx it"
            ),
        ));
    }
    tracing::warn!(
        file = %path.display(),
        mode = format!("{mode:03o}"),
        "every user may read or change this secret file; chmod o-rwx it"
    );
    Ok(())
}

/// Reads a secret from a value or the first line of a file; `setting` is
/// the file's flag without dashes (`smb-password-file`), named in errors.
///
/// Errors: the file cannot be read.
pub fn secret(setting: &str, value: &Option<String>, file: &Option<PathBuf>) -> Result<Option<String>, String> {
    if let Some(f) = file {
        let s = read_secret_file(f).map_err(|e| format!("--{setting}: cannot read {}: {e}", f.display()))?;
        return Ok(Some(s));
    }
    Ok(value.clone())
}
