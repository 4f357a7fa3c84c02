//! What is refused before s3s verifies a signature: the precheck rules
//! (`crate::precheck`), a SigV2 signature checked in constant time
//! (`s3s_patches::sigv2`), and a presigned URL's checksum parameters
//! (`s3s_patches::query_checksum`). A refused request's body is read
//! anyway (up to a bound), so that the client is not reset mid-send
//! before it reads the answer. What passes gets the admissions that let
//! s3s take what AWS takes (a body of undeclared length, a trailer mode
//! without its announcement).

use std::sync::Arc;

use tower::Service;

use super::{always_ready, Answering, Layer, Request};
use crate::precheck;

/// The prechecks layer; see the module docs.
#[derive(Clone)]
pub(super) struct Prechecks<S> {
    inner: S,
    rules: Arc<precheck::Rules>,
    sigv2: Arc<crate::s3s_patches::sigv2::Verifier>,
}

impl<S> Prechecks<S> {
    pub(super) fn new(
        inner: S,
        rules: Arc<precheck::Rules>,
        sigv2: Arc<crate::s3s_patches::sigv2::Verifier>,
    ) -> Prechecks<S> {
        Prechecks { inner, rules, sigv2 }
    }
}

impl<S> Service<Request> for Prechecks<S>
where
    S: Layer,
{
    always_ready!();

    fn call(&mut self, mut req: Request) -> Answering {
        let now = time::OffsetDateTime::now_utc();
        let refused = precheck::refusal(&mut req, &self.rules, now)
            .or_else(|| self.sigv2.check(&req, now).err())
            .or_else(|| crate::s3s_patches::query_checksum::hoist(&mut req).err());
        let Some(refusal) = refused else {
            precheck::admit_undeclared_length(&mut req);
            crate::s3s_patches::chunk_bounds::admit_unannounced_trailer(req.headers_mut());
            return self.inner.call(req);
        };
        // A client waiting for 100 Continue sends nothing more; hyper
        // closes that connection instead (see `answer`).
        if !precheck::expects_continue(req.headers()) {
            tokio::spawn(crate::unread_body::drain(req.into_body()));
        }
        Box::pin(async move { Ok(refusal.to_response()) })
    }
}
