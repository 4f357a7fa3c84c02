//! The innermost layer: the body as s3s gets it, and s3s itself. A body
//! read whole is paced (`crate::paced_body`: past its time, 400
//! RequestTimeout); an aws-chunked body's chunks are held to a size before
//! s3s buffers one (`s3s_patches::chunk_bounds`); any other is drained
//! when s3s drops it unread (`crate::unread_body`).

use s3s::service::S3Service;
use tower::Service;

use super::whole_bodies::ReadWhole;
use super::{always_ready, Answering, Request};
use crate::precheck::Refusal;
use crate::s3s_patches::chunk_bounds;
use crate::unread_body::DrainOnDrop;

/// The s3s service, given its body; see the module docs.
#[derive(Clone)]
pub(super) struct S3Call {
    pub(super) s3: S3Service,
    /// How fast a body read whole must come.
    pub(super) pace: crate::paced_body::Pace,
}

impl Service<Request> for S3Call {
    always_ready!();

    fn call(&mut self, req: Request) -> Answering {
        let s3 = self.s3.clone();
        if req.extensions().get::<ReadWhole>().is_some() {
            let (parts, body) = req.into_parts();
            let (paced, cut) = crate::paced_body::PacedBody::new(DrainOnDrop::new(body), self.pace);
            return Box::pin(async move {
                let resp = s3.call(http::Request::from_parts(parts, s3s::Body::http_body_unsync(paced))).await?;
                Ok(match cut.happened() {
                    true => Refusal::request_timeout().to_response(),
                    false => resp,
                })
            });
        }
        if chunk_bounds::is_aws_chunked(req.headers()) {
            let (parts, body) = req.into_parts();
            let (bounded, oversized) = chunk_bounds::ChunkBounded::new(DrainOnDrop::new(body), &parts.headers);
            let limit = bounded.limit();
            return Box::pin(async move {
                let resp = s3.call(http::Request::from_parts(parts, s3s::Body::http_body_unsync(bounded))).await?;
                Ok(match oversized.happened() {
                    true => Refusal::chunk_too_large(limit).to_response(),
                    false => resp,
                })
            });
        }
        Box::pin(async move { s3.call(req.map(DrainOnDrop::wrap)).await })
    }
}
