//! `rls-hello`: the floor of a gRPC call, for `scripts/bench-peers`. A tonic server speaking
//! the same `envoy.service.ratelimit.v3.RateLimitService` as sluiced's `listen.grpc`, whose
//! `ShouldRateLimit` answers a constant: `OK`, with one `OK` status per descriptor asked and
//! no limiter behind it. What sluiced spends beyond this is its own cost per check, not
//! HTTP/2's or protobuf's.
//!
//! `rls-hello --grpc 127.0.0.1:9091`

use anyhow::{Context, Result};
use clap::Parser;
use sluice_server::rls::pb::rate_limit_response::{Code, DescriptorStatus};
use sluice_server::rls::pb::rate_limit_service_server::{RateLimitService, RateLimitServiceServer};
use sluice_server::rls::pb::{RateLimitRequest, RateLimitResponse};
use tonic::{Request, Response, Status};

#[derive(Debug, Parser)]
#[command(
    name = "rls-hello",
    about = "Envoy RLS server answering every ShouldRateLimit with a constant OK"
)]
struct Args {
    /// TCP address to serve on.
    #[arg(long, value_name = "HOST:PORT")]
    grpc: String,
}

#[derive(Debug, Clone, Copy)]
struct Hello;

#[tonic::async_trait]
impl RateLimitService for Hello {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let ok = DescriptorStatus {
            code: Code::Ok as i32,
            ..DescriptorStatus::default()
        };
        Ok(Response::new(RateLimitResponse {
            overall_code: Code::Ok as i32,
            statuses: vec![ok; request.get_ref().descriptors.len()],
            ..RateLimitResponse::default()
        }))
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let listener = tokio::net::TcpListener::bind(&args.grpc)
        .await
        .with_context(|| format!("cannot listen on {}", args.grpc))?;
    // As sluiced serves `listen.grpc`: tonic's server, Nagle off.
    tonic::transport::Server::builder()
        .add_service(RateLimitServiceServer::new(Hello))
        .serve_with_incoming(
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
        )
        .await
        .context("the gRPC server failed")
}
