//! The webhook target: each event message is POSTed as JSON to the
//! target's URL, and counts as taken on a 2xx answer. With a secret, the
//! request carries `x-smbgate-signature-256: sha256=HEX`, the HMAC-SHA256
//! of the body under that key, which the receiver recomputes to know the
//! message is the gateway's and whole; `x-smbgate-event-id` names the
//! event, the same each time it is sent (delivery is at least once). A
//! 4xx other than 408 and 429 refuses the event for good: it is dropped.

use std::time::Duration;

use super::targets::SendError;

/// The signature header's name.
pub const SIGNATURE_HEADER: &str = "x-smbgate-signature-256";

/// The header naming the event, the same each time it is sent.
pub const ID_HEADER: &str = "x-smbgate-event-id";

/// How long one POST may take, connection included.
const TIMEOUT: Duration = Duration::from_secs(10);

/// A webhook target.
pub struct Webhook {
    client: reqwest::Client,
    url: reqwest::Url,
    key: Option<aws_lc_rs::hmac::Key>,
}

impl Webhook {
    /// A webhook posting to `url`, signing with `secret` if given, trusting
    /// the PEM certificates in `ca_file` beside the system's.
    ///
    /// Errors: `ca_file` unreadable or not PEM; the client cannot be built.
    pub fn new(
        url: reqwest::Url,
        secret: Option<String>,
        ca_file: Option<&std::path::Path>,
    ) -> Result<Webhook, String> {
        // A redirect is not followed: reqwest would turn the POST into a
        // GET without the event, and count its 2xx as the event taken.
        let mut builder = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .connect_timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none());
        if let Some(f) = ca_file {
            let pem = std::fs::read(f).map_err(|e| format!("ca_file {}: {e}", f.display()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| format!("ca_file {}: not PEM certificates: {e}", f.display()))?;
            builder = builder.tls_certs_merge(certs);
        }
        let client = builder.build().map_err(|e| format!("webhook client: {e}"))?;
        let key = secret.map(|s| aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, s.as_bytes()));
        Ok(Webhook { client, url, key })
    }
}

/// `sha256=HEX`: the signature of `body` under `key`.
pub fn signature(key: &aws_lc_rs::hmac::Key, body: &[u8]) -> String {
    format!("sha256={}", hex::encode(aws_lc_rs::hmac::sign(key, body).as_ref()))
}

#[async_trait::async_trait]
impl super::targets::Target for Webhook {
    async fn send(&self, id: &str, body: &[u8]) -> Result<(), SendError> {
        let mut req = self
            .client
            .post(self.url.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(ID_HEADER, id)
            .body(body.to_vec());
        if let Some(key) = &self.key {
            req = req.header(SIGNATURE_HEADER, signature(key, body));
        }
        // The URL holds no credentials (refused at startup); reqwest's
        // errors name it.
        let resp = req.send().await.map_err(|e| SendError::passing(e.to_string()))?;
        let status = resp.status();
        match status.as_u16() {
            200..=299 => Ok(()),
            // The receiver refuses this event, not events: sending it again
            // would block those behind it forever.
            400..=499 if !matches!(status.as_u16(), 408 | 429) => {
                Err(SendError { reason: format!("{} answered {status}", self.url), permanent: true })
            }
            _ => Err(SendError::passing(format!("{} answered {status}", self.url))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_hmac_sha256_of_the_body() {
        // RFC 4231 test case 2.
        let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, b"Jefe");
        assert_eq!(
            signature(&key, b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
