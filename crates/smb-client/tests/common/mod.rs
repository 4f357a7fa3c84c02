//! Test support: a throwaway Samba started with scripts/samba-test-server.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

use smb_client::session::ClientConfig;

pub mod forge;

/// A running smbd; stopped on drop.
pub struct Samba {
    pub env: HashMap<String, String>,
}

impl Samba {
    /// Starts smbd with extra `scripts/samba-test-server start` arguments.
    pub fn start(args: &[&str]) -> Samba {
        let out = Command::new(script()).arg("start").args(args).output().expect("run samba-test-server");
        assert!(out.status.success(), "samba-test-server start failed:\n{}", String::from_utf8_lossy(&out.stderr));
        let env = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.trim_matches('\'').to_string()))
            .collect();
        Samba { env }
    }

    pub fn get(&self, k: &str) -> &str {
        &self.env[k]
    }

    pub fn addr(&self) -> String {
        format!("{}:{}", self.get("SMB_HOST"), self.get("SMB_PORT"))
    }

    pub fn config(&self) -> ClientConfig {
        ClientConfig::new(&self.addr(), self.get("SMB_USER"), self.get("SMB_PASSWORD"))
    }

    pub fn share_path(&self) -> PathBuf {
        PathBuf::from(self.get("SMB_SHARE_PATH"))
    }

    /// Lines of `smbstatus -L` (files open on the server) that name `name`.
    pub fn open_files(&self, name: &str) -> Vec<String> {
        let conf = format!("{}/smb.conf", self.get("SMB_DIR"));
        let out = Command::new("smbstatus").args(["-s", &conf, "-L"]).output().expect("run smbstatus");
        String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.contains(name)).map(str::to_string).collect()
    }

    /// Waits up to 5 s for no file naming `name` to be open on the server;
    /// returns the lines still open after that.
    pub async fn wait_closed(&self, name: &str) -> Vec<String> {
        for _ in 0..50 {
            let open = self.open_files(name);
            if open.is_empty() {
                return open;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        self.open_files(name)
    }

    /// Runs smbclient against the share with `cmd`; returns stdout.
    pub fn smbclient(&self, cmd: &str) -> String {
        let out = Command::new("smbclient")
            .arg(format!("//{}/{}", self.get("SMB_HOST"), self.get("SMB_SHARE")))
            .args(["-p", self.get("SMB_PORT"), "-m", "SMB3"])
            .arg("-U")
            .arg(format!("{}%{}", self.get("SMB_USER"), self.get("SMB_PASSWORD")))
            .args(["-c", cmd])
            .output()
            .expect("run smbclient");
        assert!(
            out.status.success(),
            "smbclient {cmd} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Kills smbd (all its processes) without removing the state dir.
    pub fn kill(&self) {
        let _ = Command::new("pkill").args(["-9", "-f", &format!("{}/smb.conf", self.get("SMB_DIR"))]).status();
    }

    /// Stops (SIGSTOP) every smbd process: requests already sent stay
    /// unanswered until [`Samba::kill`].
    pub fn freeze(&self) {
        let _ = Command::new("pkill").args(["-STOP", "-f", &format!("{}/smb.conf", self.get("SMB_DIR"))]).status();
    }

    /// Starts smbd again on the same dir and port, as the script does, and
    /// waits until it accepts TCP connections.
    #[allow(clippy::zombie_processes)] // smbd daemonises; stop() kills it by config path
    pub fn restart(&self) {
        let dir = self.get("SMB_DIR");
        let child = Command::new("setsid")
            .args(["smbd", "--foreground", "--no-process-group", "-s", &format!("{dir}/smb.conf")])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("smbd");
        std::fs::write(format!("{dir}/smbd.pid"), child.id().to_string()).unwrap();
        for _ in 0..150 {
            if std::net::TcpStream::connect(self.addr()).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("smbd did not come back");
    }
}

impl Drop for Samba {
    fn drop(&mut self) {
        let _ = Command::new(script()).args(["stop", self.get("SMB_DIR")]).output();
    }
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/samba-test-server")
}
