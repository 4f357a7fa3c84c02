//! Form uploads (POST Object, a `multipart/form-data` POST to a bucket):
//! answered by `s3s_patches::post_object`, which s3s cannot route. The
//! form's access key travels back to the answer layer as a response
//! extension ([`super::answer::FormKey`]).

use std::sync::Arc;

use tower::Service;

use super::answer::FormKey;
use super::{always_ready, Answering, Layer, Request};
use crate::access_check::{OperationSlot, Resolved};
use crate::s3s_patches::post_object::{PostObject, OPERATION};

/// The forms layer; see the module docs.
#[derive(Clone)]
pub(super) struct Forms<S> {
    pub(super) inner: S,
    pub(super) post: Arc<PostObject>,
}

impl<S> Service<Request> for Forms<S>
where
    S: Layer,
{
    always_ready!();

    fn call(&mut self, req: Request) -> Answering {
        if !crate::precheck::is_form(&req) {
            return self.inner.call(req);
        }
        let post = self.post.clone();
        let slot = req.extensions().get::<OperationSlot>().cloned();
        Box::pin(async move {
            tracing::Span::current().record("operation", OPERATION);
            let (mut resp, posted) = post.answer(req).await;
            if let Some(key) = posted.access_key.as_deref() {
                resp.extensions_mut().insert(FormKey(crate::auth_log::printable_key(key)));
            }
            if let Some(slot) = slot {
                let _ = slot.0.set(Resolved {
                    operation: OPERATION,
                    bucket: posted.bucket,
                    key: posted.key,
                    identity: posted.user.as_ref().map(|u| u.name.clone()),
                    smb_identity: posted.user.as_ref().and_then(|u| u.smb.as_ref()).map(|s| s.to_string()),
                });
            }
            Ok(resp)
        })
    }
}
