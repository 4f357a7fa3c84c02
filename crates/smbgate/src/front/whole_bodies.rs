//! A body the gateway reads whole (an XML body: DeleteObjects, tagging,
//! CORS, CompleteMultipartUpload …) takes its share of the process's
//! budget before anything reads it (`crate::body_budget`), and holds it
//! until s3s has answered (by then the body is read); while it holds it,
//! it must keep coming (the innermost layer paces it, see `s3_call`).

use tower::Service;

use super::{always_ready, Answering, Layer, Request};

/// A request extension: this request's body is read whole and holds a
/// share of the budget, so it is paced.
#[derive(Clone, Copy)]
pub(super) struct ReadWhole;

/// The layer; see the module docs.
#[derive(Clone)]
pub(super) struct WholeBodies<S> {
    pub(super) inner: S,
    pub(super) bodies: crate::body_budget::BodyBudget,
}

impl<S> Service<Request> for WholeBodies<S>
where
    S: Layer + Clone + Send + 'static,
{
    always_ready!();

    fn call(&mut self, mut req: Request) -> Answering {
        let Some(needs) = crate::body_budget::needed(&req) else { return self.inner.call(req) };
        let (bodies, mut inner) = (self.bodies.clone(), self.inner.clone());
        Box::pin(async move {
            match bodies.take(needs).await {
                Ok(_held) => {
                    req.extensions_mut().insert(ReadWhole);
                    inner.call(req).await
                }
                Err(refusal) => {
                    // Read what the client sends anyway, as a precheck's
                    // refusal does (see `prechecks`).
                    if !crate::precheck::expects_continue(req.headers()) {
                        tokio::spawn(crate::unread_body::drain(req.into_body()));
                    }
                    Ok(refusal.to_response())
                }
            }
        })
    }
}
