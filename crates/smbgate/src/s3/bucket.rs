//! Bucket operations: ListBuckets, CreateBucket, HeadBucket, DeleteBucket,
//! GetBucketLocation, and the bucket ACL stubs.

use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};

use super::convert::{owner, timestamp};
use super::{s3_error, Gateway};
use crate::store::StoreError;

/// Most buckets one ListBuckets page may ask for (`max-buckets`).
const MAX_BUCKETS: i32 = 10_000;

/// ListBuckets, in name order, with `prefix`, `max-buckets` and an opaque
/// `continuation-token` (the last name of the previous page); the last
/// page carries no ContinuationToken.
pub async fn list_buckets(gw: &Gateway, req: S3Request<ListBucketsInput>) -> S3Result<S3Response<ListBucketsOutput>> {
    let i = req.input;
    let max = match i.max_buckets {
        None => usize::MAX,
        Some(n) if (1..=MAX_BUCKETS).contains(&n) => n as usize,
        Some(_) => {
            return Err(S3Error::with_message(
                S3ErrorCode::InvalidArgument,
                format!("max-buckets must be between 1 and {MAX_BUCKETS}"),
            ))
        }
    };
    let after = match i.continuation_token.as_deref().filter(|t| !t.is_empty()) {
        None => None,
        Some(t) => Some(super::list::decode_token(t)?),
    };
    let configured = gw.identities.configured();
    let id = gw.user.as_ref().and_then(|u| u.smb.as_ref());
    // --share's buckets, unless the user may use none of them (then its
    // account need not exist on that server). A refused login is 403; a
    // share root the account may not list shows no bucket.
    let wants_share = match gw.user.as_ref().map(|u| &u.buckets) {
        Some(crate::users::Buckets::Only(names)) => names.iter().any(|n| !configured.contains(&n.as_str())),
        _ => true,
    };
    let mut buckets = Vec::new();
    if wants_share {
        match gw.identities.store(None, id).await {
            Ok(s) => match s.buckets().list_buckets().await {
                Ok(b) => buckets = b,
                Err(StoreError::AccessDenied) => {}
                Err(e) => return Err(s3_error(e)),
            },
            Err(e) => return Err(s3_error(e)),
        }
    }
    // Configured buckets, each from its own root, in place of any directory
    // of the same name under --share.
    buckets.retain(|b| !configured.contains(&b.name.as_str()));
    for name in configured {
        if gw.user.as_ref().is_some_and(|u| !u.may_use(name)) {
            continue;
        }
        // Its server is one the user's credentials do not go to.
        if gw.user.as_ref().is_some_and(|u| gw.identities.on_another_server(name) && !u.may_log_on_for(name)) {
            continue;
        }
        // A server that refuses the user's account (logged at ERROR, with
        // the server) hides only its bucket.
        let store = match gw.identities.store(Some(name), id).await {
            Ok(s) => s,
            Err(StoreError::AccessDenied) => continue,
            Err(e) => return Err(s3_error(e)),
        };
        match store.buckets().list_buckets().await {
            Ok(b) => buckets.extend(b),
            // Gone, or not the user's to see: not listed.
            Err(StoreError::NoSuchBucket | StoreError::AccessDenied) => {}
            Err(e) => return Err(s3_error(e)),
        }
    }
    // A user sees only the buckets it may use.
    if let Some(u) = &gw.user {
        buckets.retain(|b| u.may_use(&b.name));
    }
    buckets.sort_by(|a, b| a.name.cmp(&b.name));
    let prefix = i.prefix.clone().unwrap_or_default();
    // Every bucket is in the gateway's one region: `bucket-region` naming
    // another lists none.
    let in_region = i.bucket_region.as_deref().is_none_or(|r| r == &*gw.region);
    let mut page: Vec<_> = buckets
        .into_iter()
        .filter(|b| in_region && b.name.starts_with(&prefix) && after.as_ref().is_none_or(|a| b.name > *a))
        .take(max.saturating_add(1))
        .collect();
    let more = page.len() > max;
    page.truncate(max);
    let next = more.then(|| page.last().map(|b| super::list::encode_token(&b.name))).flatten();
    let list = page
        .into_iter()
        .map(|b| Bucket {
            name: Some(b.name),
            creation_date: Some(timestamp(b.created)),
            bucket_region: Some(gw.region.to_string()),
        })
        .collect();
    Ok(S3Response::new(ListBucketsOutput {
        buckets: Some(list),
        owner: Some(owner()),
        continuation_token: next,
        prefix: i.prefix,
    }))
}

pub async fn create_bucket(
    gw: &Gateway,
    req: S3Request<CreateBucketInput>,
) -> S3Result<S3Response<CreateBucketOutput>> {
    let bucket = req.input.bucket;
    match gw.store.buckets().create_bucket(&bucket).await {
        // Object Lock at creation turns versioning on with it.
        Ok(()) if req.input.object_lock_enabled_for_bucket == Some(true) => {
            gw.store.buckets().enable_object_lock(&bucket).await.map_err(s3_error)?
        }
        Ok(()) => {}
        // S3's legacy rule: in us-east-1, creating a bucket you already own
        // succeeds (and leaves its contents alone); elsewhere it is 409.
        Err(StoreError::BucketAlreadyOwnedByYou) if &*gw.region == "us-east-1" => {}
        Err(e) => return Err(s3_error(e)),
    }
    Ok(S3Response::new(CreateBucketOutput { location: Some(format!("/{bucket}")) }))
}

pub async fn head_bucket(gw: &Gateway, req: S3Request<HeadBucketInput>) -> S3Result<S3Response<HeadBucketOutput>> {
    gw.store.buckets().head_bucket(&req.input.bucket).await.map_err(s3_error)?;
    Ok(S3Response::new(HeadBucketOutput { bucket_region: Some(gw.region.to_string()), ..Default::default() }))
}

pub async fn delete_bucket(
    gw: &Gateway,
    req: S3Request<DeleteBucketInput>,
) -> S3Result<S3Response<DeleteBucketOutput>> {
    gw.store.buckets().delete_bucket(&req.input.bucket).await.map_err(s3_error)?;
    Ok(S3Response::new(DeleteBucketOutput {}))
}

pub async fn get_bucket_location(
    gw: &Gateway,
    req: S3Request<GetBucketLocationInput>,
) -> S3Result<S3Response<GetBucketLocationOutput>> {
    gw.store.buckets().head_bucket(&req.input.bucket).await.map_err(s3_error)?;
    // us-east-1 is reported as an empty LocationConstraint, as S3 does.
    let loc = (&*gw.region != "us-east-1").then(|| BucketLocationConstraint::from(gw.region.to_string()));
    Ok(S3Response::new(GetBucketLocationOutput { location_constraint: loc }))
}

/// The owner with FULL_CONTROL: the only grant this gateway has.
pub fn full_control() -> Grants {
    vec![Grant {
        grantee: Some(Grantee {
            display_name: Some("smbgate".into()),
            email_address: None,
            id: Some("smbgate".into()),
            type_: Type::from_static(Type::CANONICAL_USER),
            uri: None,
        }),
        permission: Some(Permission::from_static(Permission::FULL_CONTROL)),
    }]
}

pub async fn get_bucket_acl(
    gw: &Gateway,
    req: S3Request<GetBucketAclInput>,
) -> S3Result<S3Response<GetBucketAclOutput>> {
    gw.store.buckets().head_bucket(&req.input.bucket).await.map_err(s3_error)?;
    Ok(S3Response::new(GetBucketAclOutput { grants: Some(full_control()), owner: Some(owner()) }))
}

pub async fn put_bucket_acl(
    gw: &Gateway,
    req: S3Request<PutBucketAclInput>,
) -> S3Result<S3Response<PutBucketAclOutput>> {
    // Canned ACLs are accepted and ignored: the share's own permissions rule.
    gw.store.buckets().head_bucket(&req.input.bucket).await.map_err(s3_error)?;
    Ok(S3Response::new(PutBucketAclOutput::default()))
}
