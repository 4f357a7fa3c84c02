//! The HTTP front door: the s3s service wrapped in tower layers, one
//! concern each, in the order a request meets them:
//!
//! 1. [`health`]: load-balancer probes (`HEAD /`), answered from the pool.
//! 2. [`answer`]: a request ID (headers, error bodies, a field of every log
//!    line about it), the metrics, the log of each answer (server faults at
//!    ERROR, client errors at DEBUG), the log of failed authentications,
//!    the access-log line, and the fixes to what s3s writes otherwise than
//!    AWS.
//! 3. [`cross_origin`]: CORS preflights answered from the bucket's rules, and the
//!    headers of the allowing rule on a cross-origin request's answer.
//! 4. [`prechecks`]: what is refused before s3s verifies a signature (the
//!    precheck rules, SigV2, a presigned URL's checksum), and the
//!    admissions that let s3s take what AWS takes.
//! 5. [`whole_bodies`]: a body read whole takes its share of the budget
//!    first.
//! 6. [`forms`]: form uploads (POST Object), answered by `post_object`.
//! 7. [`s3_call`]: the body as s3s gets it (paced, chunk-bounded, or drained
//!    when dropped), and s3s itself.
//!
//! Every layer is always ready (none holds back a request in
//! `poll_ready`); what a request must wait for, it waits for in its call.
//! So the stack is called without `poll_ready`, once per clone: a tower
//! middleware that relies on readiness (a concurrency limit) would need
//! `Front` to drive it first.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use s3s::service::S3Service;
use s3s::{HttpError, HttpResponse};
use tower::{Service, ServiceBuilder};

use crate::conn_limits::RequestBody;
use crate::metrics::Metrics;
use crate::store::share::Pool;

mod answer;
mod cross_origin;
mod forms;
mod health;
mod prechecks;
mod s3_call;
mod whole_bodies;

pub use answer::PREFLIGHT_OPERATION;

/// A request as the front takes it.
type Request = http::Request<RequestBody>;

/// What every layer answers with.
type Answering = Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send>>;

/// The layers around s3s, built once; cloned per request.
type Stack = health::Health<
    answer::Answer<cross_origin::Cors<prechecks::Prechecks<whole_bodies::WholeBodies<forms::Forms<s3_call::S3Call>>>>>,
>;

/// The service hyper runs for each connection.
#[derive(Clone)]
pub struct Front {
    stack: Stack,
}

impl Front {
    /// Wraps the s3s service; `pool` answers health probes, `metrics`
    /// counts every request, `rules` are checked before s3s verifies a
    /// signature, `users` check SigV2 signatures in constant time before
    /// s3s does, `bodies` bounds the XML bodies held at once, `cors`
    /// answers preflights and decorates requests with an Origin, `domain`
    /// is `--domain`, `post` answers form uploads, `pace` holds the bodies
    /// read whole to a pace.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        s3: S3Service,
        pool: Pool,
        metrics: Arc<Metrics>,
        rules: crate::precheck::Rules,
        users: crate::users::Directory,
        bodies: crate::body_budget::BodyBudget,
        cors: crate::cors_rules::Cache,
        domain: Option<crate::vhost::Domain>,
        post: crate::s3s_patches::post_object::PostObject,
        pace: crate::paced_body::Pace,
    ) -> Front {
        let sigv2 = Arc::new(crate::s3s_patches::sigv2::Verifier::new(users, domain.clone()));
        let cors = Arc::new(cross_origin::CorsRules { cache: cors, domain: domain.clone() });
        let (rules, post) = (Arc::new(rules), Arc::new(post));
        let stack = ServiceBuilder::new()
            .layer_fn(|inner| health::Health { inner, pool: pool.clone() })
            .layer_fn(|inner| answer::Answer::new(inner, metrics.clone(), domain.clone()))
            .layer_fn(|inner| cross_origin::Cors { inner, rules: cors.clone() })
            .layer_fn(|inner| prechecks::Prechecks::new(inner, rules.clone(), sigv2.clone()))
            .layer_fn(|inner| whole_bodies::WholeBodies { inner, bodies: bodies.clone() })
            .layer_fn(|inner| forms::Forms { inner, post: post.clone() })
            .service(s3_call::S3Call { s3, pace });
        Front { stack }
    }
}

impl hyper::service::Service<Request> for Front {
    type Response = HttpResponse;
    type Error = HttpError;
    type Future = Answering;

    fn call(&self, req: Request) -> Self::Future {
        // Every layer is always ready (see the module docs).
        self.stack.clone().call(req)
    }
}

/// What every layer is to the layer outside it: a service of front
/// requests that answers with an HTTP response.
trait Layer: Service<Request, Response = HttpResponse, Error = HttpError, Future = Answering> {}

impl<S: Service<Request, Response = HttpResponse, Error = HttpError, Future = Answering>> Layer for S {}

/// The parts of `tower::Service` every layer has alike: its types, and a
/// `poll_ready` that never holds back a request (see the module docs).
macro_rules! always_ready {
    () => {
        type Response = s3s::HttpResponse;
        type Error = s3s::HttpError;
        type Future = super::Answering;

        fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), s3s::HttpError>> {
            std::task::Poll::Ready(Ok(()))
        }
    };
}
use always_ready;
