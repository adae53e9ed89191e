//! `rls-ask`: one descriptor asked of an Envoy rate-limit service `--times` times over one
//! HTTP/2 connection, plain or over TLS verified against `--ca`, each answer printed as a JSON
//! line (`code`, `limit_remaining`, `requests_per_unit`). What `scripts/test-image` asks the
//! central Pod from the host with, as a gateway's ratelimit filter would.
//!
//! `rls-ask --grpc localhost:8081 --ca ca.crt --domain edge --entry remote_address=10.0.0.1 --times 4`

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Parser;
use rustls_pki_types::ServerName;
use sluice_server::rls::generated::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use sluice_server::rls::generated::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use sluice_server::rls::pb::RateLimitRequest;
use sluice_server::rls::pb::rate_limit_response::Code;
use sluice_server::rls::pb::rate_limit_service_client::RateLimitServiceClient;
use tonic::transport::{Channel, Endpoint, Uri};

#[derive(Debug, Parser)]
#[command(
    name = "rls-ask",
    about = "Asks one descriptor of an Envoy rate-limit service (gRPC, TCP, optionally TLS)"
)]
struct Args {
    /// HOST:PORT of the service; HOST is the name the certificate is verified for.
    #[arg(long, value_name = "HOST:PORT")]
    grpc: String,
    /// Speak TLS, trusting this CA file.
    #[arg(long, value_name = "FILE")]
    ca: Option<PathBuf>,
    #[arg(long)]
    domain: String,
    /// One entry of the descriptor, in order (repeat for more).
    #[arg(long = "entry", value_name = "KEY=VALUE", required = true)]
    entries: Vec<String>,
    /// How many times to ask.
    #[arg(long, value_name = "N", default_value_t = 1)]
    times: u32,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let args = Args::parse();
    let entries = args
        .entries
        .iter()
        .map(|e| match e.split_once('=') {
            Some((key, value)) => Ok(Entry {
                key: key.to_owned(),
                value: value.to_owned(),
            }),
            None => bail!("--entry {e:?}: expected KEY=VALUE"),
        })
        .collect::<Result<Vec<_>>>()?;
    let mut client = RateLimitServiceClient::new(channel(&args).await?);
    let request = RateLimitRequest {
        domain: args.domain.clone(),
        descriptors: vec![RateLimitDescriptor {
            entries,
            ..RateLimitDescriptor::default()
        }],
        hits_addend: 0,
    };
    for _ in 0..args.times {
        let answer = client
            .should_rate_limit(request.clone())
            .await
            .context("ShouldRateLimit")?
            .into_inner();
        let status = answer
            .statuses
            .first()
            .context("an answer without a status")?;
        let code = Code::try_from(answer.overall_code).unwrap_or(Code::Unknown);
        println!(
            "{}",
            serde_json::json!({
                "code": code.as_str_name(),
                "limit_remaining": status.limit_remaining,
                "requests_per_unit": status.current_limit.as_ref().map(|l| l.requests_per_unit),
            })
        );
    }
    Ok(())
}

/// One HTTP/2 connection to `--grpc`: over TLS (ALPN h2) when `--ca` is given.
async fn channel(args: &Args) -> Result<Channel> {
    let addr = args.grpc.clone();
    let endpoint = Endpoint::from_shared(format!("http://{addr}"))
        .with_context(|| format!("--grpc {addr:?}"))?;
    let Some(ca) = &args.ca else {
        return endpoint
            .connect()
            .await
            .with_context(|| format!("connect {addr}"));
    };
    let files = sluice_tls::ClientFiles {
        ca_file: Some(ca.clone()),
        ..sluice_tls::ClientFiles::default()
    };
    let mut config = sluice_tls::client_config("ca", &files)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let host = addr
        .rsplit_once(':')
        .map_or(addr.as_str(), |(host, _)| host);
    let name = ServerName::try_from(host.to_owned()).context("--grpc: the host is no name")?;
    endpoint
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let (connector, name, addr) = (connector.clone(), name.clone(), addr.clone());
            async move {
                let tcp = tokio::net::TcpStream::connect(addr).await?;
                let tls = connector.connect(name, tcp).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(tls))
            }
        }))
        .await
        .with_context(|| format!("connect {}", args.grpc))
}
