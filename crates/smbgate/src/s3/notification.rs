//! PutBucketNotificationConfiguration and GetBucketNotificationConfiguration
//! (the rules are `crate::events::rules`'s; the configuration is kept on
//! the share as JSON), and [`Gateway::emit`], through which every handler
//! that changes an object reports it.

use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use tracing::Instrument;

use super::{s3_error, Gateway};
use crate::events::rules::Rules;
use crate::events::{Change, Origin};
use crate::store::versions::removal::Removed;

pub async fn put(
    gw: &Gateway,
    req: S3Request<PutBucketNotificationConfigurationInput>,
) -> S3Result<S3Response<PutBucketNotificationConfigurationOutput>> {
    let i = req.input;
    let rules = Rules::from_dto(i.notification_configuration, |t| gw.events.is_target(t)).map_err(|r| {
        let code = match r.code {
            "NotImplemented" => S3ErrorCode::NotImplemented,
            _ => S3ErrorCode::InvalidArgument,
        };
        S3Error::with_message(code, r.message)
    })?;
    let json = match rules.rules.is_empty() {
        // An empty configuration turns notifications off.
        true => Vec::new(),
        false => {
            serde_json::to_vec(&rules).map_err(|e| S3Error::with_message(S3ErrorCode::InternalError, e.to_string()))?
        }
    };
    gw.store.buckets().put_bucket_notifications(&i.bucket, &json).await.map_err(s3_error)?;
    gw.events.forget(&i.bucket);
    let origin = req.extensions.get::<Origin>().cloned().unwrap_or_default();
    gw.events.announce(&i.bucket, &rules, &origin).await;
    Ok(S3Response::new(PutBucketNotificationConfigurationOutput {}))
}

pub async fn get(
    gw: &Gateway,
    req: S3Request<GetBucketNotificationConfigurationInput>,
) -> S3Result<S3Response<GetBucketNotificationConfigurationOutput>> {
    let bucket = &req.input.bucket;
    gw.store.buckets().head_bucket(bucket).await.map_err(s3_error)?;
    let stored = gw.store.buckets().bucket_notifications(bucket).await.map_err(s3_error)?;
    // None, or one that does not parse: an empty configuration, as AWS
    // answers for a bucket without one.
    let rules: Rules = stored.and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
    Ok(S3Response::new(rules.to_dto()))
}

impl Gateway {
    /// DeleteObject of `key` in `bucket` under `cond`, reported to the
    /// bucket's notifications: the mark for the bucket's watcher is left
    /// before the delete (so the watcher, hearing of the removal, knows it
    /// for the gateway's own), the event queued after it.
    ///
    /// Errors: the delete's, as S3 errors.
    pub(super) async fn delete_reported(
        &self,
        extensions: &http::Extensions,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        cond: &crate::store::conditions::Conditions,
        bypass: bool,
    ) -> S3Result<Option<Removed>> {
        if !self.events.is_on() {
            return self.store.deletes().delete(bucket, key, version_id, cond, bypass).await.map_err(s3_error);
        }
        // In a task of its own, so that a client hanging up between the
        // delete and its event does not lose the event.
        let (gw, extensions) = (self.clone(), extensions.clone());
        let (bucket, key, cond) = (bucket.to_string(), key.to_string(), cond.clone());
        let version_id = version_id.map(str::to_string);
        let deleting = tokio::spawn(
            async move {
                let marked = gw.events.mark_removal(&bucket, &key).await;
                let removed = match gw.store.deletes().delete(&bucket, &key, version_id.as_deref(), &cond, bypass).await
                {
                    Ok(removed) => removed,
                    Err(e) => {
                        if marked {
                            gw.events.unmark_removal(&bucket, &key).await;
                        }
                        return Err(s3_error(e));
                    }
                };
                let event = match &removed {
                    Some(r) if r.delete_marker && version_id.is_none() => "s3:ObjectRemoved:DeleteMarkerCreated",
                    _ => "s3:ObjectRemoved:Delete",
                };
                let version = removed.as_ref().map(|r| r.version_id.as_str());
                gw.emit(&extensions, event, &bucket, &key, None, version).await;
                Ok(removed)
            }
            .in_current_span(),
        );
        deleting.await.map_err(|e| S3Error::with_message(S3ErrorCode::InternalError, e.to_string()))?
    }

    /// Reports a change this request made (`name`, an event type such as
    /// `s3:ObjectCreated:Put`, to `key` of `bucket`; `size` and `etag` for
    /// created objects; the version made or removed on a versioned bucket)
    /// to the bucket's notifications: queued before the handler answers.
    /// Costs nothing without event targets.
    pub(super) async fn emit(
        &self,
        extensions: &http::Extensions,
        name: &'static str,
        bucket: &str,
        key: &str,
        created: Option<(u64, &str)>,
        version_id: Option<&str>,
    ) {
        if !self.events.is_on() {
            return;
        }
        let origin = extensions.get::<Origin>().cloned().unwrap_or_default();
        let principal = self.user.as_ref().map_or("anonymous", |u| u.name.as_str());
        let change = Change {
            name,
            bucket: bucket.to_string(),
            key: key.to_string(),
            size: created.map(|(s, _)| s),
            etag: created.map(|(_, e)| e.to_string()),
            version_id: version_id.map(str::to_string),
        };
        self.events.emit(change, &origin, principal).await;
    }
}
