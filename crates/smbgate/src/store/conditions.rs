//! Conditional requests, evaluated in one place for reads (GET/HEAD),
//! copy sources, writes (PUT, CompleteMultipartUpload) and deletes.
//!
//! The order is RFC 9110 13.2.2 as S3 applies it: If-Match, else
//! If-Unmodified-Since; then If-None-Match, else If-Modified-Since.

use super::error::StoreError;

/// What the conditions are evaluated against: the current object's ETag
/// (unquoted) and LastWriteTime (FILETIME).
#[derive(Debug, Clone, Copy)]
pub struct Current<'a> {
    /// ETag value, unquoted.
    pub etag: &'a str,
    /// LastWriteTime (FILETIME).
    pub last_modified: u64,
}

/// An If-Match / If-None-Match value: `*`, or a list of entity tags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EtagCondition {
    /// `*`: any current object.
    Any,
    /// Entity tags, unquoted, without a weakness prefix.
    Tags(Vec<String>),
}

impl EtagCondition {
    /// Parses a header value: `*`, or a comma list of tags, each quoted or
    /// not, strong or `W/` weak (S3 compares them all strongly).
    pub fn parse(value: &str) -> EtagCondition {
        let tags: Vec<String> = value
            .split(',')
            .map(|t| t.trim().trim_start_matches("W/").trim_matches('"').to_string())
            .filter(|t| !t.is_empty())
            .collect();
        if tags.iter().any(|t| t == "*") {
            EtagCondition::Any
        } else {
            EtagCondition::Tags(tags)
        }
    }

    /// True if `etag` (unquoted) satisfies the condition.
    pub fn matches(&self, etag: &str) -> bool {
        match self {
            EtagCondition::Any => true,
            EtagCondition::Tags(t) => t.iter().any(|t| t == etag),
        }
    }
}

/// The four conditional headers; times are Unix seconds.
#[derive(Debug, Clone, Default)]
pub struct Conditions {
    /// If-Match (or x-amz-copy-source-if-match).
    pub if_match: Option<EtagCondition>,
    /// If-None-Match.
    pub if_none_match: Option<EtagCondition>,
    /// If-Modified-Since, Unix seconds.
    pub if_modified_since: Option<i64>,
    /// If-Unmodified-Since, Unix seconds.
    pub if_unmodified_since: Option<i64>,
}

/// Conditions of a write or delete: only the ETag ones apply.
pub type WriteConditions = Conditions;

impl Conditions {
    /// True if no condition is set.
    pub fn is_empty(&self) -> bool {
        self.if_match.is_none()
            && self.if_none_match.is_none()
            && self.if_modified_since.is_none()
            && self.if_unmodified_since.is_none()
    }

    /// GET/HEAD: a failed If-Match / If-Unmodified-Since is 412
    /// PreconditionFailed, a failed If-None-Match / If-Modified-Since 304
    /// NotModified.
    pub fn check_read(&self, info: Current<'_>) -> Result<(), StoreError> {
        self.check(info, || StoreError::NotModified { etag: info.etag.to_string() })
    }

    /// A copy source (x-amz-copy-source-if-*): every failure is 412.
    pub fn check_copy_source(&self, info: Current<'_>) -> Result<(), StoreError> {
        self.check(info, || StoreError::PreconditionFailed)
    }

    fn check(&self, info: Current<'_>, not_modified: impl FnOnce() -> StoreError) -> Result<(), StoreError> {
        let modified = super::meta::filetime_to_unix(info.last_modified).0;
        if let Some(c) = &self.if_match {
            if !c.matches(info.etag) {
                return Err(StoreError::PreconditionFailed);
            }
        } else if self.if_unmodified_since.is_some_and(|t| modified > t) {
            return Err(StoreError::PreconditionFailed);
        }
        if let Some(c) = &self.if_none_match {
            if c.matches(info.etag) {
                return Err(not_modified());
            }
        } else if self.if_modified_since.is_some_and(|t| modified <= t) {
            return Err(not_modified());
        }
        Ok(())
    }

    /// A write or delete against the current object (`None`: the key does
    /// not exist): If-None-Match `*` fails on an existing object;
    /// If-Match fails with NoSuchKey on a missing one and with
    /// PreconditionFailed on another ETag.
    pub fn check_write(&self, current: Option<Current<'_>>) -> Result<(), StoreError> {
        if let (Some(c), Some(cur)) = (&self.if_none_match, current) {
            if c.matches(cur.etag) {
                return Err(StoreError::PreconditionFailed);
            }
        }
        if let Some(c) = &self.if_match {
            match current {
                None => return Err(StoreError::NoSuchKey),
                Some(cur) if !c.matches(cur.etag) => return Err(StoreError::PreconditionFailed),
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// True for `If-None-Match: *`: the write may not replace any object.
    /// Its publish then renames without ReplaceIfExists, so the share itself
    /// decides between racing writers (failure class 25).
    pub fn forbids_existing(&self) -> bool {
        self.if_none_match == Some(EtagCondition::Any)
    }

    /// True if the write depends on the current object.
    pub fn needs_current(&self) -> bool {
        self.if_match.is_some() || self.if_none_match.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_weak_tags_and_star() {
        let c = EtagCondition::parse(r#"W/"abc", "def" ,ghi"#);
        assert_eq!(c, EtagCondition::Tags(vec!["abc".into(), "def".into(), "ghi".into()]));
        assert!(c.matches("def") && !c.matches("xyz"));
        assert_eq!(EtagCondition::parse(" * "), EtagCondition::Any);
    }

    #[test]
    fn write_conditions() {
        let info = Current { etag: "e1", last_modified: 0 };
        let none_star = Conditions { if_none_match: Some(EtagCondition::Any), ..Default::default() };
        assert!(matches!(none_star.check_write(Some(info)), Err(StoreError::PreconditionFailed)));
        assert!(none_star.check_write(None).is_ok());
        let if_match = Conditions { if_match: Some(EtagCondition::parse("\"e2\"")), ..Default::default() };
        assert!(matches!(if_match.check_write(Some(info)), Err(StoreError::PreconditionFailed)));
        assert!(matches!(if_match.check_write(None), Err(StoreError::NoSuchKey)));
        let ok = Conditions { if_match: Some(EtagCondition::parse("e1")), ..Default::default() };
        assert!(ok.check_write(Some(info)).is_ok());
    }
}
