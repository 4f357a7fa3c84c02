//! An event in AWS's JSON shape (the event message structure, version
//! 2.1): one `Records` entry per message, as S3 sends them.

use std::sync::atomic::{AtomicU64, Ordering};

/// What happened, to which object.
#[derive(Debug, Clone)]
pub struct Change {
    /// The event type with its `s3:` prefix (`s3:ObjectCreated:Put`).
    pub name: &'static str,
    /// The bucket.
    pub bucket: String,
    /// The key, as the client named it.
    pub key: String,
    /// The object's size in bytes (created objects).
    pub size: Option<u64>,
    /// The ETag, unquoted (created objects).
    pub etag: Option<String>,
    /// The version created or removed (on a versioned bucket), or the
    /// delete marker made.
    pub version_id: Option<String>,
}

/// The request that made the change (a request extension set by the
/// front, cloned into the event).
#[derive(Debug, Clone, Default)]
pub struct Origin {
    /// Its `x-amz-request-id`.
    pub request_id: String,
    /// Its `x-amz-id-2`.
    pub host_id: String,
    /// The client's address (behind a trusted proxy, the one its PROXY
    /// header names).
    pub source_ip: Option<std::net::IpAddr>,
}

/// The last sequencer handed out, so that they only grow in this process.
static LAST: AtomicU64 = AtomicU64::new(0);

/// A sequencer: 16 upper-case hex digits that sort (as strings, and as
/// AWS's are compared: padded to one length) in the order this process
/// made its changes, and near the order of time across instances. Also
/// the name of the event's queue entry.
pub fn next_sequencer() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos() as u64;
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = now.max(last + 1);
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return format!("{next:016X}"),
            Err(seen) => last = seen,
        }
    }
}

/// A key as AWS writes it in an event: URL-encoded as a form field is (a
/// space as `+`), its `/` kept.
pub fn encoded_key(key: &str) -> String {
    key.split('/')
        .map(|part| form_urlencoded::byte_serialize(part.as_bytes()).collect::<String>())
        .collect::<Vec<_>>()
        .join("/")
}

/// The event message for `change`, made by `origin` as `principal` (the
/// S3 user's name; `anonymous`), matched by configuration `configuration_id`,
/// at `time`, in `region`.
pub fn message(
    change: &Change,
    origin: &Origin,
    principal: &str,
    configuration_id: &str,
    sequencer: &str,
    region: &str,
    time: std::time::SystemTime,
) -> serde_json::Value {
    let time = event_time(time);
    let mut object = serde_json::json!({
        "key": encoded_key(&change.key),
        "sequencer": sequencer,
    });
    if let Some(size) = change.size {
        object["size"] = size.into();
    }
    if let Some(etag) = &change.etag {
        object["eTag"] = etag.clone().into();
    }
    if let Some(v) = &change.version_id {
        object["versionId"] = v.clone().into();
    }
    serde_json::json!({
        "Records": [{
            "eventVersion": "2.1",
            "eventSource": "aws:s3",
            "awsRegion": region,
            "eventTime": time,
            "eventName": change.name.trim_start_matches("s3:"),
            "userIdentity": { "principalId": principal },
            "requestParameters": {
                "sourceIPAddress": origin.source_ip.map(|ip| ip.to_string()).unwrap_or_default(),
            },
            "responseElements": {
                "x-amz-request-id": origin.request_id,
                "x-amz-id-2": origin.host_id,
            },
            "s3": {
                "s3SchemaVersion": "1.0",
                "configurationId": configuration_id,
                "bucket": {
                    "name": change.bucket,
                    "ownerIdentity": { "principalId": principal },
                    "arn": format!("arn:aws:s3:::{}", change.bucket),
                },
                "object": object,
            },
        }],
    })
}

/// The message S3 sends each destination of a configuration when it is
/// put: `s3:TestEvent` for `bucket`, made by `origin`, at `time`.
pub fn test_message(bucket: &str, origin: &Origin, time: std::time::SystemTime) -> serde_json::Value {
    serde_json::json!({
        "Service": "Amazon S3",
        "Event": "s3:TestEvent",
        "Time": event_time(time),
        "Bucket": bucket,
        "RequestId": origin.request_id,
        "HostId": origin.host_id,
    })
}

/// `time` as events write it: ISO 8601, UTC, milliseconds.
fn event_time(time: std::time::SystemTime) -> String {
    let format =
        time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
    time::OffsetDateTime::from(time).format(&format).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_encoded_as_aws_encodes_them() {
        assert_eq!(encoded_key("a b/c+d=é.txt"), "a+b/c%2Bd%3D%C3%A9.txt");
    }

    #[test]
    fn sequencers_grow() {
        let a = next_sequencer();
        let b = next_sequencer();
        assert_eq!(a.len(), 16);
        assert!(b > a);
    }

    #[test]
    fn a_message_has_aws_fields() {
        let change = Change {
            name: "s3:ObjectCreated:Put",
            bucket: "b".into(),
            key: "x y".into(),
            size: Some(3),
            etag: Some("abc".into()),
            version_id: None,
        };
        let origin = Origin { request_id: "R".into(), host_id: "H".into(), source_ip: Some([127, 0, 0, 1].into()) };
        let m = message(&change, &origin, "alice", "cfg", "0001", "us-east-1", std::time::UNIX_EPOCH);
        let r = &m["Records"][0];
        assert_eq!(r["eventName"], "ObjectCreated:Put");
        assert_eq!(r["eventTime"], "1970-01-01T00:00:00.000Z");
        assert_eq!(r["s3"]["object"]["key"], "x+y");
        assert_eq!(r["s3"]["object"]["size"], 3);
        assert_eq!(r["requestParameters"]["sourceIPAddress"], "127.0.0.1");
        assert_eq!(r["responseElements"]["x-amz-request-id"], "R");
    }
}
