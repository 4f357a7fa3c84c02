//! Object Lock through S3: the bucket's configuration, a version's
//! retention and legal hold, the lock headers of writes, and what reads
//! answer of them. The rules are the store's (`store::versions::lock`).

use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};

use super::{s3_error, Gateway};
use crate::store::meta::{LockMode, ObjectMeta, Retention};
use crate::store::versions::lock_config::{self, now_ms, BucketLock};

/// The longest default retention, in days (100 years).
const MAX_DAYS: i32 = 36_500;

/// The latest date an S3 timestamp can hold (9999-12-31T23:59:59.999Z),
/// in milliseconds since the Unix epoch.
const LAST_MS: i64 = 253_402_300_799_999;

/// 400 MalformedXML, AWS's answer to a lock document it cannot use.
fn malformed() -> S3Error {
    S3Error::with_message(
        S3ErrorCode::MalformedXML,
        "The XML you provided was not well-formed or did not validate against our published schema",
    )
}

fn invalid(message: &'static str) -> S3Error {
    S3Error::with_message(S3ErrorCode::InvalidArgument, message)
}

/// Milliseconds since the Unix epoch of an S3 timestamp.
fn timestamp_ms(t: &Timestamp) -> i64 {
    let odt: time::OffsetDateTime = t.clone().into();
    (odt.unix_timestamp_nanos() / 1_000_000) as i64
}

/// The S3 timestamp of `ms` milliseconds since the Unix epoch.
fn ms_timestamp(ms: i64) -> Timestamp {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.clamp(0, LAST_MS) as u64);
    Timestamp::from(t)
}

impl Gateway {
    /// True if the request asked to bypass GOVERNANCE retention
    /// (`x-amz-bypass-governance-retention: true`) and its user may
    /// (`bypass_governance` in its table).
    pub(super) fn bypass(&self, asked: Option<bool>) -> bool {
        asked == Some(true) && self.user.as_ref().is_some_and(|u| u.bypass_governance)
    }
}

/// The lock settings of a write's headers (`x-amz-object-lock-mode`,
/// `-retain-until-date`, `-legal-hold`), put into its record `meta`.
///
/// Errors: 400 InvalidArgument for a mode without a date or the reverse,
/// an unknown mode or legal hold status, or a date not in the future.
pub(super) fn write_lock(
    meta: &mut ObjectMeta,
    mode: Option<&ObjectLockMode>,
    until: Option<&Timestamp>,
    hold: Option<&ObjectLockLegalHoldStatus>,
) -> S3Result<()> {
    meta.retention = match (mode, until) {
        (None, None) => None,
        (Some(mode), Some(until)) => {
            let mode = LockMode::parse(mode.as_str()).ok_or_else(|| invalid("Unknown wormMode directive."))?;
            let until_ms = timestamp_ms(until);
            if until_ms <= now_ms() {
                return Err(invalid("The retain until date must be in the future!"));
            }
            Some(Retention { mode, until_ms })
        }
        _ => {
            return Err(invalid("x-amz-object-lock-retain-until-date and x-amz-object-lock-mode must both be supplied"))
        }
    };
    meta.legal_hold = match hold.map(|h| h.as_str()) {
        None | Some(ObjectLockLegalHoldStatus::OFF) => false,
        Some(ObjectLockLegalHoldStatus::ON) => true,
        Some(_) => return Err(invalid("Legal Hold must be either of 'ON' or 'OFF'")),
    };
    Ok(())
}

/// The lock headers a GET or HEAD answers with: mode, retain-until date
/// and legal hold, where the version has them.
pub(super) fn read_lock(
    meta: &ObjectMeta,
) -> (Option<ObjectLockMode>, Option<Timestamp>, Option<ObjectLockLegalHoldStatus>) {
    let (mode, until) = match meta.retention {
        Some(r) => (Some(ObjectLockMode::from_static(r.mode.as_str())), Some(ms_timestamp(r.until_ms))),
        None => (None, None),
    };
    let hold = meta.legal_hold.then(|| ObjectLockLegalHoldStatus::from_static(ObjectLockLegalHoldStatus::ON));
    (mode, until, hold)
}

/// Refuses lock settings (`meta`'s) for a bucket without Object Lock
/// before anything is stored (CreateMultipartUpload; writes that publish
/// are refused by the store as they stamp their record).
///
/// Errors: 400 InvalidRequest.
pub(super) async fn check_bucket_locks(gw: &Gateway, bucket: &str, meta: &ObjectMeta) -> S3Result<()> {
    if !meta.legal_hold && meta.retention.is_none() {
        return Ok(());
    }
    let root = gw.store.root();
    let tree = root.tree().await.map_err(s3_error)?;
    match root.bucket_lock(&tree, bucket).await.map_err(s3_error)?.enabled {
        true => Ok(()),
        false => Err(s3_error(crate::store::versions::lock::bucket_not_locked())),
    }
}

/// Refuses a PUT with lock settings (its own or the bucket's default)
/// without an integrity header, as AWS does.
///
/// Errors: 400 InvalidRequest.
pub(super) async fn check_lock_digest(
    gw: &Gateway,
    bucket: &str,
    meta: &ObjectMeta,
    headers: &http::HeaderMap,
) -> S3Result<()> {
    let digest = headers.contains_key("content-md5")
        || headers.keys().any(|k| k.as_str().starts_with("x-amz-checksum-") && k != "x-amz-checksum-type")
        || headers.contains_key("x-amz-sdk-checksum-algorithm");
    if digest {
        return Ok(());
    }
    let locked = meta.retention.is_some() || meta.legal_hold || {
        let root = gw.store.root();
        let tree = root.tree().await.map_err(s3_error)?;
        root.bucket_lock(&tree, bucket).await.map_err(s3_error)?.default.is_some()
    };
    match locked {
        true => Err(S3Error::with_message(
            S3ErrorCode::InvalidRequest,
            "Content-MD5 OR x-amz-checksum- HTTP header is required for Put Object requests with Object Lock parameters",
        )),
        false => Ok(()),
    }
}

pub async fn put_configuration(
    gw: &Gateway,
    req: S3Request<PutObjectLockConfigurationInput>,
) -> S3Result<S3Response<PutObjectLockConfigurationOutput>> {
    let i = req.input;
    let config = i.object_lock_configuration.ok_or_else(malformed)?;
    if config.object_lock_enabled.as_ref().map(|e| e.as_str()) != Some(ObjectLockEnabled::ENABLED) {
        return Err(malformed());
    }
    let default = match config.rule.and_then(|r| r.default_retention) {
        None => None,
        Some(d) => {
            let mode = d.mode.as_ref().and_then(|m| LockMode::parse(m.as_str())).ok_or_else(malformed)?;
            let (days, years) = match (d.days, d.years) {
                (Some(_), Some(_)) | (None, None) => return Err(malformed()),
                (Some(n), None) | (None, Some(n)) if n <= 0 => {
                    return Err(invalid("Default retention period must be a positive integer value."))
                }
                // Dates past the year 9999 have no S3 form.
                (Some(n), None) if n > MAX_DAYS => return Err(invalid("Default retention period is too large.")),
                (None, Some(n)) if n > MAX_DAYS / 365 => return Err(invalid("Default retention period is too large.")),
                (days, years) => (days.map(|n| n as u32), years.map(|n| n as u32)),
            };
            Some(lock_config::DefaultRetention { mode, days, years })
        }
    };
    let lock = BucketLock { enabled: true, default };
    gw.store.buckets().put_object_lock_config(&i.bucket, &lock).await.map_err(s3_error)?;
    Ok(S3Response::new(PutObjectLockConfigurationOutput::default()))
}

pub async fn get_configuration(
    gw: &Gateway,
    req: S3Request<GetObjectLockConfigurationInput>,
) -> S3Result<S3Response<GetObjectLockConfigurationOutput>> {
    let lock = gw.store.buckets().object_lock_config(&req.input.bucket).await.map_err(s3_error)?;
    if !lock.enabled {
        return Err(S3Error::with_message(
            S3ErrorCode::ObjectLockConfigurationNotFoundError,
            "Object Lock configuration does not exist for this bucket",
        ));
    }
    let rule = lock.default.map(|d| ObjectLockRule {
        default_retention: Some(DefaultRetention {
            mode: Some(ObjectLockRetentionMode::from_static(d.mode.as_str())),
            days: d.days.map(|n| n as i32),
            years: d.years.map(|n| n as i32),
        }),
    });
    Ok(S3Response::new(GetObjectLockConfigurationOutput {
        object_lock_configuration: Some(ObjectLockConfiguration {
            object_lock_enabled: Some(ObjectLockEnabled::from_static(ObjectLockEnabled::ENABLED)),
            rule,
        }),
    }))
}

pub async fn put_retention(
    gw: &Gateway,
    req: S3Request<PutObjectRetentionInput>,
) -> S3Result<S3Response<PutObjectRetentionOutput>> {
    let i = req.input;
    let retention = match i.retention.map(|r| (r.mode, r.retain_until_date)) {
        None | Some((None, None)) => None,
        Some((Some(mode), Some(until))) => {
            let mode = LockMode::parse(mode.as_str()).ok_or_else(malformed)?;
            let until_ms = timestamp_ms(&until);
            if until_ms <= now_ms() {
                return Err(invalid("The retain until date must be in the future!"));
            }
            Some(Retention { mode, until_ms })
        }
        Some(_) => return Err(malformed()),
    };
    let bypass = gw.bypass(i.bypass_governance_retention);
    let version = i.version_id.as_deref();
    gw.store.writes().put_retention(&i.bucket, &i.key, version, retention, bypass).await.map_err(s3_error)?;
    Ok(S3Response::new(PutObjectRetentionOutput::default()))
}

pub async fn get_retention(
    gw: &Gateway,
    req: S3Request<GetObjectRetentionInput>,
) -> S3Result<S3Response<GetObjectRetentionOutput>> {
    let i = req.input;
    let meta = locked_meta(gw, &i.bucket, &i.key, i.version_id.as_deref()).await?;
    let r = meta.retention.ok_or_else(|| {
        S3Error::with_message(
            S3ErrorCode::NoSuchObjectLockConfiguration,
            "The specified object does not have a ObjectLock configuration",
        )
    })?;
    Ok(S3Response::new(GetObjectRetentionOutput {
        retention: Some(ObjectLockRetention {
            mode: Some(ObjectLockRetentionMode::from_static(r.mode.as_str())),
            retain_until_date: Some(ms_timestamp(r.until_ms)),
        }),
    }))
}

pub async fn put_legal_hold(
    gw: &Gateway,
    req: S3Request<PutObjectLegalHoldInput>,
) -> S3Result<S3Response<PutObjectLegalHoldOutput>> {
    let i = req.input;
    let on = match i.legal_hold.and_then(|h| h.status).as_ref().map(|s| s.as_str()) {
        Some(ObjectLockLegalHoldStatus::ON) => true,
        Some(ObjectLockLegalHoldStatus::OFF) => false,
        _ => return Err(malformed()),
    };
    let version = i.version_id.as_deref();
    gw.store.writes().put_legal_hold(&i.bucket, &i.key, version, on).await.map_err(s3_error)?;
    Ok(S3Response::new(PutObjectLegalHoldOutput::default()))
}

pub async fn get_legal_hold(
    gw: &Gateway,
    req: S3Request<GetObjectLegalHoldInput>,
) -> S3Result<S3Response<GetObjectLegalHoldOutput>> {
    let i = req.input;
    let meta = locked_meta(gw, &i.bucket, &i.key, i.version_id.as_deref()).await?;
    let status = if meta.legal_hold { ObjectLockLegalHoldStatus::ON } else { ObjectLockLegalHoldStatus::OFF };
    Ok(S3Response::new(GetObjectLegalHoldOutput {
        legal_hold: Some(ObjectLockLegalHold { status: Some(ObjectLockLegalHoldStatus::from_static(status)) }),
    }))
}

/// The record of `key` (or of its version `version`) in a bucket with
/// Object Lock.
///
/// Errors: 400 InvalidRequest for a bucket without Object Lock; 404 for a
/// key or version that is not there.
async fn locked_meta(gw: &Gateway, bucket: &str, key: &str, version: Option<&str>) -> S3Result<ObjectMeta> {
    let lock = gw.store.buckets().object_lock_config(bucket).await.map_err(s3_error)?;
    if !lock.enabled {
        return Err(s3_error(crate::store::versions::lock::bucket_not_locked()));
    }
    let reads = gw.store.reads();
    let info = match version {
        Some(v) => reads.version_info(bucket, key, v).await,
        None => reads.head_object(bucket, key).await,
    };
    Ok(info.map_err(s3_error)?.meta)
}
