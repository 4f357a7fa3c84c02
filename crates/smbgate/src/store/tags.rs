//! S3's tag rules: what a tag set may hold, for an object (at most 10
//! tags) and for a bucket (at most 50), and the `x-amz-tagging` header's
//! form (`k1=v1&k2=v2`, URL-encoded).

use super::error::{StoreError, StoreResult};

/// Tags as (key, value) pairs, in the order given.
pub type TagSet = Vec<(String, String)>;

/// Most tags on one object.
pub const MAX_OBJECT_TAGS: usize = 10;
/// Most tags on one bucket.
pub const MAX_BUCKET_TAGS: usize = 50;
/// Longest key, in UTF-16 code units.
const MAX_KEY: usize = 128;
/// Longest value, in UTF-16 code units.
const MAX_VALUE: usize = 256;

/// The tags of an `x-amz-tagging` header (`k1=v1&k2`: a key without `=`
/// has an empty value), checked as an object's.
///
/// Errors: InvalidTag, as [`check_object`].
pub fn parse_header(header: &str) -> StoreResult<TagSet> {
    let tags: TagSet =
        form_urlencoded::parse(header.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    check_object(&tags)?;
    Ok(tags)
}

/// Checks an object's tag set.
///
/// Errors: InvalidTag for more than 10 tags, or a tag [`check`] refuses.
pub fn check_object(tags: &TagSet) -> StoreResult<()> {
    if tags.len() > MAX_OBJECT_TAGS {
        return Err(StoreError::InvalidTag("Object tags cannot be greater than 10".into()));
    }
    check(tags)
}

/// Checks a bucket's tag set.
///
/// Errors: InvalidTag for more than 50 tags, or a tag [`check`] refuses.
pub fn check_bucket(tags: &TagSet) -> StoreResult<()> {
    if tags.len() > MAX_BUCKET_TAGS {
        return Err(StoreError::InvalidTag("Bucket tag count cannot be greater than 50".into()));
    }
    check(tags)
}

/// Every tag's key and value: a key of 1 to 128 and a value of up to 256
/// UTF-16 code units, of letters, digits, white space and `_ . : / = + -
/// @`; no key starting with `aws:` (AWS keeps those for itself); no key
/// twice.
fn check(tags: &TagSet) -> StoreResult<()> {
    let allowed = |s: &str| s.chars().all(|c| c.is_alphanumeric() || c.is_whitespace() || "_.:/=+-@".contains(c));
    for (i, (k, v)) in tags.iter().enumerate() {
        if k.is_empty() || !allowed(k) {
            return Err(StoreError::InvalidTag("The TagKey you have provided is invalid".into()));
        }
        if k.encode_utf16().count() > MAX_KEY {
            return Err(StoreError::InvalidTag("The TagKey you have provided is too long, max 128".into()));
        }
        if !allowed(v) {
            return Err(StoreError::InvalidTag("The TagValue you have provided is invalid".into()));
        }
        if v.encode_utf16().count() > MAX_VALUE {
            return Err(StoreError::InvalidTag("The TagValue you have provided is too long, max 256".into()));
        }
        if k.starts_with("aws:") {
            return Err(StoreError::InvalidTag("Your TagKey cannot be prefixed with aws:".into()));
        }
        if tags[..i].iter().any(|(other, _)| other == k) {
            return Err(StoreError::InvalidTag("Cannot provide multiple Tags with the same key".into()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> TagSet {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn refused(r: StoreResult<()>) -> String {
        match r {
            Err(StoreError::InvalidTag(m)) => m,
            other => panic!("expected InvalidTag, got {other:?}"),
        }
    }

    #[test]
    fn the_header_is_url_encoded_pairs() {
        assert_eq!(
            parse_header("team=data%20lake&stage=raw+1&empty").unwrap(),
            tags(&[("team", "data lake"), ("stage", "raw 1"), ("empty", "")])
        );
        assert_eq!(parse_header("").unwrap(), TagSet::new());
    }

    #[test]
    fn limits_are_aws_s() {
        let ten: TagSet = (0..10).map(|i| (format!("k{i}"), "v".into())).collect();
        assert!(check_object(&ten).is_ok());
        let eleven: TagSet = (0..11).map(|i| (format!("k{i}"), "v".into())).collect();
        assert!(refused(check_object(&eleven)).contains("greater than 10"));
        assert!(check_bucket(&eleven).is_ok());
        let fifty_one: TagSet = (0..51).map(|i| (format!("k{i}"), "v".into())).collect();
        assert!(refused(check_bucket(&fifty_one)).contains("greater than 50"));
        // Lengths count UTF-16 units: 128 'é' are 128 units (256 bytes).
        assert!(check_object(&tags(&[(&"é".repeat(128), &"v".repeat(256))])).is_ok());
        assert!(refused(check_object(&tags(&[(&"k".repeat(129), "v")]))).contains("too long"));
        assert!(refused(check_object(&tags(&[("k", &"v".repeat(257))]))).contains("too long"));
        // A character outside the BMP is two units.
        assert!(refused(check_object(&tags(&[(&"𝔸".repeat(65), "v")]))).contains("too long"));
    }

    #[test]
    fn keys_are_unique_and_characters_allowed() {
        assert!(refused(check_object(&tags(&[("a", "1"), ("a", "2")]))).contains("same key"));
        assert!(refused(check_object(&tags(&[("", "v")]))).contains("TagKey"));
        assert!(refused(check_object(&tags(&[("a<b", "v")]))).contains("TagKey"));
        assert!(refused(check_object(&tags(&[("k", "v&w")]))).contains("TagValue"));
        assert!(refused(check_object(&tags(&[("aws:x", "v")]))).contains("aws:"));
        assert!(check_object(&tags(&[("Ünïcode key_.:/=+-@ 1", "välue 2")])).is_ok());
    }
}
