//! What a GET or HEAD answers, decided in the store from the object and
//! the request: first the conditional headers (RFC 9110 13.2.2: 412, then
//! 304), then `partNumber` or `Range`. The S3 adapter only maps the
//! [`ReadPlan`] (or the refusal, a [`StoreError`] carrying what its headers
//! need) to HTTP.

use crate::store::Reads;
use std::ops::Range;

use super::sealed::check_customer_key;
use super::stream::object_stream;
use crate::store::conditions::Conditions;
use crate::store::sse_c::CustomerKey;
use crate::store::types::ObjectInfo;
use crate::store::{StoreError, StoreResult};

/// Bytes read with the open itself (one round trip for a small object)
/// when the first byte to send is known before the object is.
pub const FIRST_READ: u32 = 1 << 20;

/// A byte range as the client asked for it (RFC 9110 14.1.2), before it is
/// checked against the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteRange {
    /// `bytes=first-` (`last: None`) or `bytes=first-last`, both inclusive.
    FromTo {
        /// First byte.
        first: u64,
        /// Last byte, if given.
        last: Option<u64>,
    },
    /// `bytes=-length`: the last `length` bytes.
    Suffix {
        /// Bytes from the end.
        length: u64,
    },
}

impl ByteRange {
    /// The bytes of an object of `size` bytes this range selects.
    ///
    /// Errors: none of its bytes are in the object (416).
    fn within(self, size: u64) -> StoreResult<Range<u64>> {
        let unsatisfiable = || StoreError::RangeNotSatisfiable { size };
        match self {
            ByteRange::FromTo { first, .. } if first >= size => Err(unsatisfiable()),
            ByteRange::FromTo { first, last: Some(last) } if last < first => Err(unsatisfiable()),
            ByteRange::FromTo { first, last } => Ok(first..last.map_or(size, |l| l.min(size - 1) + 1)),
            ByteRange::Suffix { length: 0 } => Err(unsatisfiable()),
            ByteRange::Suffix { length } => Ok(size - length.min(size)..size),
        }
    }
}

/// What a GET or HEAD asks for besides its key.
#[derive(Debug, Clone, Default)]
pub struct ReadRequest {
    /// If-Match, If-None-Match, If-Modified-Since, If-Unmodified-Since.
    pub conditions: Conditions,
    /// `partNumber` (1-based).
    pub part_number: Option<i32>,
    /// `Range`, when it parsed as one byte range (one that does not is
    /// ignored before it gets here, as AWS ignores it).
    pub range: Option<ByteRange>,
    /// The SSE-C key the request brought (`x-amz-server-side-encryption-
    /// customer-*`).
    pub sse_c: Option<CustomerKey>,
}

impl ReadRequest {
    /// Where to read ahead with the open, before the object is known:
    /// `(offset, length)` from the start of the object or of a `bytes=N-`
    /// range; `None` for a part or a suffix, whose start depends on the
    /// object, and for a range of an SSE-C object, whose bytes in the file
    /// are elsewhere.
    pub fn first_read(&self) -> Option<(u64, u32)> {
        if self.sse_c.is_some() {
            return (self.part_number.is_none() && self.range.is_none()).then_some((0, FIRST_READ));
        }
        match (self.part_number, self.range) {
            (None, None) => Some((0, FIRST_READ)),
            (None, Some(ByteRange::FromTo { first, .. })) => Some((first, FIRST_READ)),
            _ => None,
        }
    }
}

/// An object opened for a GET, and what to send of it.
pub struct Read {
    /// What a client sees of the object.
    pub info: ObjectInfo,
    /// The bytes to send.
    pub plan: ReadPlan,
    /// `plan.range` of the object, streamed (see `super::stream`): from
    /// the object cache, or from the open file, whose handle closes when
    /// the body ends or is dropped.
    pub body: super::stream::BodyStream,
}

/// The bytes a GET sends, or a HEAD describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadPlan {
    /// Byte offsets in the object, end exclusive.
    pub range: Range<u64>,
    /// 206 Partial Content with a Content-Range (a `Range` or `partNumber`
    /// was asked for), else 200.
    pub partial: bool,
}

impl ReadPlan {
    /// Decides what `req` gets of the object `info`.
    ///
    /// Errors: PreconditionFailed (412: If-Match, If-Unmodified-Since);
    /// NotModified (304, with the ETag: If-None-Match, If-Modified-Since);
    /// InvalidPart (400: a part the object does not have, as AWS answers
    /// for multipart and single-PUT objects alike); RangeNotSatisfiable
    /// (416, with the size); an SSE-C key missing, wrong or not applicable
    /// ([`check_customer_key`]).
    pub fn decide(info: &ObjectInfo, req: &ReadRequest) -> StoreResult<ReadPlan> {
        check_customer_key(info, req.sse_c.as_ref())?;
        req.conditions.check_read(info.current())?;
        match (req.part_number, req.range) {
            (Some(n), _) => Ok(ReadPlan { range: part_range(info, n)?, partial: true }),
            // A suffix of an empty object is the whole (empty) object.
            (None, Some(ByteRange::Suffix { .. })) if info.size == 0 => Ok(ReadPlan { range: 0..0, partial: false }),
            (None, Some(r)) => Ok(ReadPlan { range: r.within(info.size)?, partial: true }),
            (None, None) => Ok(ReadPlan { range: 0..info.size, partial: false }),
        }
    }
}

/// The bytes of part `n` of the object (the whole object is part 1 of a
/// single-part object).
///
/// Errors: InvalidPart for a part it does not have.
fn part_range(info: &ObjectInfo, n: i32) -> StoreResult<Range<u64>> {
    let parts = &info.meta.parts;
    let bad = || StoreError::InvalidPart(format!("the object has no part {n}: it has {} part(s)", parts.len().max(1)));
    if parts.is_empty() {
        return if n == 1 { Ok(0..info.size) } else { Err(bad()) };
    }
    if n < 1 || n as usize > parts.len() {
        return Err(bad());
    }
    let start: u64 = parts[..n as usize - 1].iter().sum();
    Ok(start..start + parts[n as usize - 1])
}

impl Reads {
    /// GET: opens `key` (reading ahead with the open where
    /// [`ReadRequest::first_read`] allows), decides what to send, and
    /// starts streaming it.
    ///
    /// Errors: as [`Reads::open_object`] and [`ReadPlan::decide`].
    pub async fn get_object(&self, bucket: &str, key: &str, req: &ReadRequest) -> StoreResult<Read> {
        if let Some(hit) = self.cached(bucket, key).await {
            if let Some(body) = hit.body {
                let plan = ReadPlan::decide(&hit.info, req)?;
                let first = Some(body.slice(plan.range.start as usize..plan.range.end as usize));
                let body = object_stream(self.clone(), None, hit.info.clone(), plan.range.clone(), first);
                return Ok(Read { info: hit.info, plan, body });
            }
        }
        let read = req.first_read();
        let (opened, info, data) = self.open_object(bucket, key, read).await?;
        self.fill_later(bucket, key, &info);
        // On an early return the handle closes itself.
        let plan = tracing::debug_span!("store.read_plan").in_scope(|| ReadPlan::decide(&info, req))?;
        let body = self.body_of(opened, &info, plan.range.clone(), req.sse_c.as_ref(), data, read)?;
        Ok(Read { info, plan, body })
    }

    /// HEAD: the object's info and what a GET of it would send.
    ///
    /// Errors: as [`Reads::head_object`] and [`ReadPlan::decide`].
    pub async fn head_read(&self, bucket: &str, key: &str, req: &ReadRequest) -> StoreResult<(ObjectInfo, ReadPlan)> {
        let info = self.head_object(bucket, key).await?;
        let plan = ReadPlan::decide(&info, req)?;
        Ok((info, plan))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conditions::EtagCondition;
    use crate::store::meta::ObjectMeta;

    fn object(size: u64, parts: &[u64]) -> ObjectInfo {
        ObjectInfo {
            size,
            last_modified: 0,
            etag: "abc".into(),
            meta: ObjectMeta { parts: parts.to_vec(), ..Default::default() },
            path: "b\\k".into(),
            disk_id: None,
        }
    }

    fn range(r: ByteRange) -> ReadRequest {
        ReadRequest { range: Some(r), ..Default::default() }
    }

    fn plan(info: &ObjectInfo, req: &ReadRequest) -> Result<(Range<u64>, bool), String> {
        ReadPlan::decide(info, req).map(|p| (p.range, p.partial)).map_err(|e| format!("{e:?}"))
    }

    #[test]
    fn ranges_are_clipped_to_the_object_or_refused_with_its_size() {
        let o = object(10, &[]);
        let from = |first, last| range(ByteRange::FromTo { first, last });
        assert_eq!(plan(&o, &ReadRequest::default()), Ok((0..10, false)));
        assert_eq!(plan(&o, &from(2, Some(4))), Ok((2..5, true)));
        assert_eq!(plan(&o, &from(2, None)), Ok((2..10, true)));
        assert_eq!(plan(&o, &from(9, Some(100))), Ok((9..10, true)));
        assert_eq!(plan(&o, &range(ByteRange::Suffix { length: 3 })), Ok((7..10, true)));
        assert_eq!(plan(&o, &range(ByteRange::Suffix { length: 30 })), Ok((0..10, true)));
        for refused in [from(10, None), from(5, Some(4)), range(ByteRange::Suffix { length: 0 })] {
            assert_eq!(plan(&o, &refused), Err("RangeNotSatisfiable { size: 10 }".into()), "{refused:?}");
        }
        let empty = object(0, &[]);
        assert_eq!(plan(&empty, &range(ByteRange::Suffix { length: 5 })), Ok((0..0, false)));
        assert_eq!(plan(&empty, &from(0, None)), Err("RangeNotSatisfiable { size: 0 }".into()));
    }

    #[test]
    fn a_part_number_selects_that_part() {
        let part = |n| ReadRequest { part_number: Some(n), ..Default::default() };
        let multi = object(12, &[5, 5, 2]);
        assert_eq!(plan(&multi, &part(1)), Ok((0..5, true)));
        assert_eq!(plan(&multi, &part(3)), Ok((10..12, true)));
        let with_range = ReadRequest { range: Some(ByteRange::Suffix { length: 1 }), ..part(2) };
        assert_eq!(plan(&multi, &with_range), Ok((5..10, true)), "the part wins over a range");
        for n in [0, 4, -1] {
            assert!(plan(&multi, &part(n)).unwrap_err().starts_with("InvalidPart"), "part {n}");
        }
        let single = object(7, &[]);
        assert_eq!(plan(&single, &part(1)), Ok((0..7, true)));
        assert!(plan(&single, &part(2)).unwrap_err().contains("has 1 part(s)"));
    }

    #[test]
    fn conditions_come_before_the_range_and_a_304_carries_the_etag() {
        let o = object(10, &[]);
        let unsatisfiable = Some(ByteRange::FromTo { first: 50, last: None });
        let cond = |c: Conditions| ReadRequest { conditions: c, range: unsatisfiable, ..Default::default() };
        let etag = |s: &str| Some(EtagCondition::parse(s));
        let r = plan(&o, &cond(Conditions { if_none_match: etag("\"abc\""), ..Default::default() }));
        assert_eq!(r, Err("NotModified { etag: \"abc\" }".into()));
        let r = plan(&o, &cond(Conditions { if_match: etag("\"other\""), ..Default::default() }));
        assert_eq!(r, Err("PreconditionFailed".into()));
        let r = plan(&o, &cond(Conditions { if_match: etag("\"abc\""), ..Default::default() }));
        assert_eq!(r, Err("RangeNotSatisfiable { size: 10 }".into()));
    }
}
