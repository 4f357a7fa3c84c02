//! The NATS target: each event message is published on the target's
//! subject through the `async-nats` client. With `jetstream`, it counts as
//! taken once JetStream acknowledges it (stored in a stream); else once
//! the publish is flushed to the server (core NATS keeps nothing for a
//! subscriber that is not there).

use std::time::Duration;

use tokio::sync::Mutex;

use super::targets::SendError;

/// How long connecting, or one publish and its acknowledgment, may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// A NATS target. The connection is made on the first send and kept (the
/// client reconnects by itself after that).
pub struct Nats {
    url: String,
    subject: String,
    jetstream: bool,
    user: Option<(String, String)>,
    ca_file: Option<std::path::PathBuf>,
    client: Mutex<Option<async_nats::Client>>,
}

impl Nats {
    /// A target publishing on `subject` of the server at `url`, as `user`
    /// if given, trusting `ca_file` (PEM) for `tls://`.
    pub fn new(
        url: &str,
        subject: &str,
        jetstream: bool,
        user: Option<(String, String)>,
        ca_file: Option<&std::path::Path>,
    ) -> Nats {
        Nats {
            url: url.to_string(),
            subject: subject.to_string(),
            jetstream,
            user,
            ca_file: ca_file.map(Into::into),
            client: Mutex::new(None),
        }
    }

    /// The client, connecting it first if there is none.
    async fn client(&self) -> Result<async_nats::Client, String> {
        let mut held = self.client.lock().await;
        if let Some(c) = held.as_ref() {
            return Ok(c.clone());
        }
        let mut options = async_nats::ConnectOptions::new().connection_timeout(TIMEOUT);
        if let Some((u, p)) = &self.user {
            options = options.user_and_password(u.clone(), p.clone());
        }
        if let Some(ca) = &self.ca_file {
            options = options.add_root_certificates(ca.clone());
        }
        let client = options.connect(self.url.as_str()).await.map_err(|e| format!("{}: {e}", self.url))?;
        *held = Some(client.clone());
        Ok(client)
    }
}

#[async_trait::async_trait]
impl super::targets::Target for Nats {
    async fn send(&self, id: &str, body: &[u8]) -> Result<(), SendError> {
        let client = self.client().await.map_err(SendError::passing)?;
        let payload = bytes::Bytes::copy_from_slice(body);
        let subject = self.subject.clone();
        // JetStream drops a repeat of an ID it stored within its
        // duplicate window.
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", id);
        let sent = async {
            if self.jetstream {
                let js = async_nats::jetstream::new(client);
                let ack = js.publish_with_headers(subject, headers, payload).await.map_err(|e| e.to_string())?;
                ack.await.map(|_| ()).map_err(|e| e.to_string())
            } else {
                client.publish_with_headers(subject, headers, payload).await.map_err(|e| e.to_string())?;
                client.flush().await.map_err(|e| e.to_string())
            }
        };
        match tokio::time::timeout(TIMEOUT, sent).await {
            Ok(r) => r.map_err(|e| SendError::passing(format!("{} subject {}: {e}", self.url, self.subject))),
            Err(_) => Err(SendError::passing(format!(
                "{} subject {}: no acknowledgment within {TIMEOUT:?}",
                self.url, self.subject
            ))),
        }
    }
}
