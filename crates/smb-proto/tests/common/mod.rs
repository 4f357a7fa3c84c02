//! Fixture loading shared by the integration tests: golden SMB2 messages are
//! stored as hex text under `tests/fixtures/`, with `#` comment lines.
#![allow(dead_code)]

use bytes::Bytes;

/// Every `.hex` fixture, by file stem.
pub const FIXTURES: &[&str] = &[
    "negotiate_response",
    "session_setup_response_challenge",
    "session_setup_response",
    "tree_connect_response",
    "compound_create_write_close_request",
    "compound_create_write_close_response",
    "compound_create_read_close_response",
    "query_info_network_open_response",
    "query_info_full_ea_response",
    "ioctl_resume_key_response",
    "compound_create_query_directory_close_response",
    "negotiate_request_smbclient",
    "create_request_smbclient",
    "create_response_smbclient",
    "write_response_pending_smbclient",
    "write_response_smbclient",
    "read_response_smbclient",
    "close_response_smbclient",
    "error_object_name_not_found_smbclient",
];

fn path(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The bytes of `tests/fixtures/{name}.hex`.
pub fn fixture(name: &str) -> Bytes {
    let p = path(&format!("{name}.hex"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
    let hex: String =
        text.lines().filter(|l| !l.trim_start().starts_with('#')).flat_map(str::split_whitespace).collect();
    Bytes::from(hex::decode(&hex).unwrap_or_else(|e| panic!("{p}: {e}")))
}

/// The file that was written and read back during the capture
/// (`/etc/os-release` of the capturing machine, 267 bytes).
pub fn payload() -> Vec<u8> {
    let p = path("os-release.payload");
    std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}
