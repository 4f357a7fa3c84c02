//! A POST Object policy against its form: the policy document is parsed
//! by s3s (`PostPolicy`); its conditions are checked here because s3s's
//! own check takes the form with its file read whole into memory.
//!
//! AWS's rules: the policy must not have expired; every `eq` and
//! `starts-with` condition holds (field names case-insensitive, values
//! case-sensitive, `bucket` is the bucket posted to); every form field is
//! named by a condition except `policy`, the signature fields, `file` and
//! `x-ignore-*`; `content-length-range` bounds the file (checked as it
//! arrives, see `super::body`).

use s3s::post_policy::{PostPolicy, PostPolicyCondition};
use s3s::{S3Error, S3ErrorCode, S3Result};

use super::form::Fields;

/// The policy `encoded` (base64 JSON, as sent), if it has not expired at
/// `now`.
///
/// Errors: 400 InvalidPolicyDocument for a policy that does not decode or
/// parse; 403 AccessDenied once expired.
pub fn parse(encoded: &str, now: time::OffsetDateTime) -> S3Result<PostPolicy> {
    let policy = PostPolicy::from_base64(encoded)
        .map_err(|e| S3Error::with_message(S3ErrorCode::InvalidPolicyDocument, format!("Invalid Policy: {e}")))?;
    let expiration: time::OffsetDateTime = policy.expiration.clone().into();
    if now >= expiration {
        return Err(refused("Policy expired."));
    }
    Ok(policy)
}

fn refused(why: &str) -> S3Error {
    S3Error::with_message(S3ErrorCode::AccessDenied, format!("Invalid according to Policy: {why}"))
}

/// True for the fields no condition needs to name.
fn exempt(name: &str) -> bool {
    matches!(name, "policy" | "x-amz-signature" | "signature" | "awsaccesskeyid" | "file")
        || name.starts_with("x-ignore-")
}

/// Checks `policy`'s field conditions against `fields`, for an upload to
/// `bucket`.
///
/// Errors: 403 AccessDenied naming the first condition that fails (as
/// AWS writes it) or the fields no condition names.
pub fn check_fields(policy: &PostPolicy, fields: &Fields, bucket: &str) -> S3Result<()> {
    let value = |field: &str| if field == "bucket" { Some(bucket) } else { fields.get(field) };
    for c in &policy.conditions {
        let (op, field, expected, holds) = match c {
            PostPolicyCondition::Eq { field, value: v } => ("eq", field, v, value(field) == Some(v.as_str())),
            PostPolicyCondition::StartsWith { field, prefix } => {
                // An empty prefix allows any value, and no field at all.
                let holds = value(field).map_or(prefix.is_empty(), |v| v.starts_with(prefix.as_str()));
                ("starts-with", field, prefix, holds)
            }
            PostPolicyCondition::ContentLengthRange { .. } => continue,
        };
        if !holds {
            let expected = serde_json::Value::from(expected.as_str());
            return Err(refused(&format!(r#"Policy Condition failed: ["{op}", "${field}", {expected}]"#)));
        }
    }
    let named = |name: &str| {
        policy.conditions.iter().any(|c| match c {
            PostPolicyCondition::Eq { field, .. } | PostPolicyCondition::StartsWith { field, .. } => field == name,
            PostPolicyCondition::ContentLengthRange { .. } => false,
        })
    };
    let extra: Vec<&str> = fields.iter().map(|(k, _)| k).filter(|k| !exempt(k) && !named(k)).collect();
    if !extra.is_empty() {
        return Err(refused(&format!("Extra input fields: {}", extra.join(", "))));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(conditions: &str) -> PostPolicy {
        PostPolicy::from_json(&format!(r#"{{"expiration": "2030-01-01T00:00:00Z", "conditions": {conditions}}}"#))
            .unwrap()
    }

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        Fields::from_pairs(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    fn message(r: S3Result<()>) -> String {
        let e = r.unwrap_err();
        assert_eq!(e.code(), &S3ErrorCode::AccessDenied);
        e.message().unwrap().to_string()
    }

    #[test]
    fn conditions_hold_or_name_themselves() {
        let p = policy(
            r#"[{"bucket": "b"}, ["starts-with", "$key", "up/"], ["eq", "$Content-Type", "text/plain"],
                ["starts-with", "$x-amz-meta-tag", ""], ["content-length-range", 1, 10]]"#,
        );
        let ok = fields(&[("key", "up/a"), ("Content-Type", "text/plain"), ("policy", "p"), ("x-ignore-me", "1")]);
        check_fields(&p, &ok, "b").unwrap();
        assert_eq!(
            message(check_fields(&p, &ok, "c")),
            r#"Invalid according to Policy: Policy Condition failed: ["eq", "$bucket", "b"]"#
        );
        let bad_key = fields(&[("key", "down/a"), ("content-type", "text/plain")]);
        assert_eq!(
            message(check_fields(&p, &bad_key, "b")),
            r#"Invalid according to Policy: Policy Condition failed: ["starts-with", "$key", "up/"]"#
        );
        // Values are case-sensitive.
        let case = fields(&[("key", "up/a"), ("content-type", "Text/Plain")]);
        assert!(message(check_fields(&p, &case, "b")).contains(r#"["eq", "$content-type", "text/plain"]"#));
        let extra =
            fields(&[("key", "up/a"), ("content-type", "text/plain"), ("x-amz-meta-other", "1"), ("acl", "private")]);
        assert_eq!(
            message(check_fields(&p, &extra, "b")),
            "Invalid according to Policy: Extra input fields: x-amz-meta-other, acl"
        );
        let missing = fields(&[("key", "up/a")]);
        assert!(message(check_fields(&p, &missing, "b")).contains("eq"));
    }

    #[test]
    fn expired_and_malformed_policies() {
        let now = time::OffsetDateTime::now_utc();
        let encode = |json: &str| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, json);
        let expired = encode(r#"{"expiration": "2020-01-01T00:00:00Z", "conditions": []}"#);
        let e = parse(&expired, now).unwrap_err();
        assert_eq!(
            (e.code(), e.message()),
            (&S3ErrorCode::AccessDenied, Some("Invalid according to Policy: Policy expired."))
        );
        for bad in [
            "not base64!",
            &encode("{}"),
            &encode(r#"{"expiration": "2030-01-01T00:00:00Z", "conditions": [["nope"]]}"#),
        ] {
            assert_eq!(parse(bad, now).unwrap_err().code(), &S3ErrorCode::InvalidPolicyDocument, "{bad}");
        }
        parse(&encode(r#"{"expiration": "2030-01-01T00:00:00Z", "conditions": []}"#), now).unwrap();
    }
}
