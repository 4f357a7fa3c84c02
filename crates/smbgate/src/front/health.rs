//! Load-balancer probes: `HEAD /` answers 200 while an SMB connection is
//! up, else 503, before anything else looks at the request.

use tower::Service;

use super::{always_ready, Answering, Layer, Request};
use crate::store::share::Pool;

/// The health layer; see the module docs.
#[derive(Clone)]
pub(super) struct Health<S> {
    pub(super) inner: S,
    /// Whose connections the probe reports.
    pub(super) pool: Pool,
}

impl<S> Service<Request> for Health<S>
where
    S: Layer,
{
    always_ready!();

    fn call(&mut self, req: Request) -> Answering {
        if req.method() == http::Method::HEAD && req.uri().path() == "/" {
            let status =
                if self.pool.healthy() > 0 { http::StatusCode::OK } else { http::StatusCode::SERVICE_UNAVAILABLE };
            let mut resp = http::Response::new(s3s::Body::empty());
            *resp.status_mut() = status;
            return Box::pin(async move { Ok(resp) });
        }
        self.inner.call(req)
    }
}
