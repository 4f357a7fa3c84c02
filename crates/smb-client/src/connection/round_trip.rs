//! One trace span per SMB round trip, for OpenTelemetry export: a batch of
//! compound chains sent as one write, and the answers to it. The span
//! names the commands (MS-SMB2 2.2.1.2), the credits charged, the bytes
//! sent and the server, and records the NTSTATUS of the last answer
//! awaited (for a compound, its last message's).
//!
//! A span costs nothing unless a subscriber enables [`TARGET`] at DEBUG:
//! the gateway does only when traces are exported. Numbers are recorded
//! as `i64`, which trace exporters keep as integers.

use smb_proto::{Command, NtStatus};
use tracing::field::Empty;

use super::Op;

/// The `tracing` target of round-trip spans.
pub const TARGET: &str = "smb_client::round_trip";

/// Most commands named in a span's `smb.command` (a large batch of small
/// opens would otherwise make a long string).
const MAX_NAMED: usize = 8;

/// The span of a batch of `chains` to the server at `peer` (`host:port`),
/// charging `charges` credits; `Span::none()` when nobody traces, when no
/// span is current (the pool's keepalives, the reaper's CLOSEs and lease
/// acknowledgments belong to no request), or when every message is a READ
/// or a WRITE (pipelined data: the caller's span of the transfer covers
/// them, so a 1 GiB GET is not 16,000 spans).
pub(super) fn batch_span(chains: &[&[Op<'_>]], charges: &[u16], peer: &str) -> tracing::Span {
    if !tracing::enabled!(target: TARGET, tracing::Level::DEBUG) || tracing::Span::current().is_none() {
        return tracing::Span::none();
    }
    let commands: Vec<Command> = chains.iter().flat_map(|c| c.iter()).map(|op| op.body.command()).collect();
    if commands.iter().all(|&c| c == Command::Read || c == Command::Write) {
        return tracing::Span::none();
    }
    let span = tracing::debug_span!(
        target: TARGET,
        "smb2",
        otel.name = Empty,
        otel.kind = "client",
        otel.status_code = Empty,
        smb.command = Empty,
        smb.messages = Empty,
        smb.credit_charge = Empty,
        smb.bytes_sent = Empty,
        smb.bytes_received = Empty,
        smb.status = Empty,
        server.address = Empty,
        server.port = Empty,
    );
    let mut named: Vec<&str> = commands.iter().take(MAX_NAMED).map(|c| c.name()).collect();
    if commands.len() > MAX_NAMED {
        named.push("…");
    }
    let first: Vec<&str> = chains.first().map_or(Vec::new(), |c| c.iter().map(|op| op.body.command().name()).collect());
    let (host, port) = peer.rsplit_once(':').unwrap_or((peer, ""));
    span.record("otel.name", format!("SMB2 {}", first.join("+")));
    span.record("smb.command", named.join("+"));
    span.record("smb.messages", commands.len() as i64);
    span.record("smb.credit_charge", charges.iter().map(|&c| c as i64).sum::<i64>());
    span.record("server.address", host.trim_start_matches('[').trim_end_matches(']'));
    if let Ok(port) = port.parse::<u16>() {
        span.record("server.port", port as i64);
    }
    span
}

/// Records an answer's NTSTATUS and size on `span`; a status of severity
/// error marks the span as failed.
pub(super) fn record_answer(span: &tracing::Span, status: NtStatus, bytes: usize) {
    if span.is_none() {
        return;
    }
    match status.name() {
        Some(name) => span.record("smb.status", name),
        None => span.record("smb.status", format!("{:#010x}", status.0)),
    };
    span.record("smb.bytes_received", bytes as i64);
    if status.is_error() {
        span.record("otel.status_code", "error");
    }
}

/// `r`, an awaited answer, recorded on `span` (its status, or the failure).
pub(super) fn recorded(
    span: &tracing::Span,
    r: crate::error::Result<super::Response>,
) -> crate::error::Result<super::Response> {
    match &r {
        Ok(a) => record_answer(span, a.header.status, a.msg.len()),
        Err(e) => record_failure(span, e),
    }
    r
}

/// Records a failure with no answer (a timeout, a lost connection).
pub(super) fn record_failure(span: &tracing::Span, error: &crate::error::Error) {
    if span.is_none() {
        return;
    }
    span.record("smb.status", tracing::field::display(error));
    span.record("otel.status_code", "error");
}
