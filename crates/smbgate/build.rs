//! Records the git commit the binary is built from, for `smbgate --version`
//! (SMBGATE_GIT_COMMIT; "unknown" outside a git checkout).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    // --no-optional-locks: a plain `git status` refreshes and rewrites
    // .git/index, which this script watches, so every build would ask for
    // the next one.
    let dirty =
        git(&["--no-optional-locks", "status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    let commit = if dirty && commit != "unknown" { format!("{commit}-modified") } else { commit };
    println!("cargo:rustc-env=SMBGATE_GIT_COMMIT={commit}");
    // Build again when HEAD moves (a commit, a checkout).
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{r}");
        }
        println!("cargo:rerun-if-changed={dir}/index");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
