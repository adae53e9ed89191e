//! Real Envoy (`envoy.filters.http.ratelimit`) in front of a tiny app, with a real daemon as its
//! rate-limit service: `examples/envoy/envoy.yaml` and `examples/envoy/sluice.toml` as they
//! are, with free loopback ports in place of the example's.

use sluice_client::Client;
use sluice_testkit::certs::Certs;
use sluice_testkit::{Envoy, free_port};
use sluice_tests::{Daemon, Upstream, assert_allowed_headers, header, replace_once, repo_file};

struct Stack {
    _certs: Certs,
    _daemon: Daemon,
    app: Upstream,
    envoy: Envoy,
    client: Client,
}

/// How Envoy reaches sluiced's RLS.
#[derive(Clone, Copy)]
enum Rls {
    Tcp,
    /// `listen.grpc = "unix:PATH"`, an Envoy `pipe` address.
    Unix,
    /// TCP with `[listen.tls]` and a client CA (mTLS): Envoy's cluster has a TLS transport
    /// socket with the CA and a client certificate, h2 by ALPN.
    Mtls,
}

async fn stack() -> Stack {
    stack_with(Rls::Tcp).await
}

async fn stack_with(rls: Rls) -> Stack {
    let certs = Certs::new();
    let mut toml = repo_file("examples/envoy/sluice.toml");
    if let Rls::Mtls = rls {
        toml.push_str(&format!(
            "\n[listen.tls]\ncert_file = {:?}\nkey_file = {:?}\nclient_ca_file = {:?}\n",
            certs.server.cert.display().to_string(),
            certs.server.key.display().to_string(),
            certs.ca_file.display().to_string(),
        ));
    }
    let daemon = Daemon::start(&toml).await;
    let app = Upstream::start().await;
    let (listen, admin) = (free_port(), free_port());
    let mut config = repo_file("examples/envoy/envoy.yaml");
    if let Rls::Unix = rls {
        config = replace_once(
            &config,
            "socket_address: { address: 127.0.0.1, port_value: 8081 }",
            &format!(
                "pipe: {{ path: {:?} }}",
                daemon.grpc_socket.display().to_string()
            ),
        );
    }
    for (from, to) in [
        (10000, listen),
        (9901, admin),
        (8000, app.addr.port()),
        (8081, daemon.grpc.port()),
    ] {
        if from == 8081 && matches!(rls, Rls::Unix) {
            continue;
        }
        config = replace_once(
            &config,
            &format!("port_value: {from} }}"),
            &format!("port_value: {to} }}"),
        );
    }
    if let Rls::Mtls = rls {
        let path = |p: &std::path::Path| p.display().to_string();
        config = replace_once(
            &config,
            "      load_assignment:\n        cluster_name: sluiced",
            &format!(
                "      transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
          sni: localhost
          common_tls_context:
            alpn_protocols: [h2]
            validation_context:
              trusted_ca: {{ filename: {:?} }}
              match_typed_subject_alt_names:
                - san_type: DNS
                  matcher: {{ exact: localhost }}
            tls_certificates:
              - certificate_chain: {{ filename: {:?} }}
                private_key: {{ filename: {:?} }}
      load_assignment:
        cluster_name: sluiced",
                path(&certs.ca_file),
                path(&certs.client.cert),
                path(&certs.client.key),
            ),
        );
    }
    // A loaded CI machine running a debug build may take longer than the example's budget;
    // past it Envoy would let requests through unchecked, which is not what is under test.
    config = replace_once(&config, "timeout: 0.25s", "timeout: 5s");
    let envoy = tokio::task::spawn_blocking(move || Envoy::start(&config, admin))
        .await
        .unwrap();
    Stack {
        _certs: certs,
        _daemon: daemon,
        app,
        envoy,
        client: Client::tcp(format!("127.0.0.1:{listen}")),
    }
}

impl Stack {
    async fn get(&self, headers: &[(&str, &str)]) -> sluice_client::RawResponse {
        self.client
            .send(http::Method::GET, "/orders", headers, "")
            .await
            .unwrap()
    }
}

#[tokio::test]
async fn through_envoy_the_limit_holds_with_sluices_headers() {
    let s = stack().await;
    let client = [("x-forwarded-for", "10.20.0.1")];
    for left in (0..5).rev() {
        let answer = s.get(&client).await;
        assert_eq!(answer.status, 200, "{}", s.envoy.log());
        assert_eq!(&answer.body[..], b"app");
        assert_allowed_headers(&answer.headers, 5, left, "\"per_ip\";q=5;w=60");
    }
    let denied = s.get(&client).await;
    assert_eq!(denied.status, 429);
    assert_eq!(header(&denied.headers, "x-ratelimit-remaining"), "0");
    assert_eq!(header(&denied.headers, "retry-after"), "12");
    assert_eq!(
        header(&denied.headers, "content-type"),
        "application/problem+json"
    );
    assert_eq!(header(&denied.headers, "ratelimit"), "\"per_ip\";r=0;t=12");
    let body: serde_json::Value = serde_json::from_slice(&denied.body).unwrap();
    assert_eq!(body["error"], "rate_limit_exceeded", "{body}");
    assert_eq!(s.app.hits(), 5, "the denied request never reached the app");
    // Another client address is limited on its own.
    assert_eq!(s.get(&[("x-forwarded-for", "10.20.0.2")]).await.status, 200);
}

#[tokio::test]
async fn through_envoy_two_descriptors_are_all_or_nothing() {
    let s = stack().await;
    let user = [("x-forwarded-for", "10.20.1.1"), ("x-user-id", "ann")];
    for _ in 0..3 {
        assert_eq!(s.get(&user).await.status, 200, "{}", s.envoy.log());
    }
    let denied = s.get(&user).await;
    assert_eq!(denied.status, 429);
    assert_eq!(header(&denied.headers, "x-ratelimit-limit"), "3");
    // Without the user, only the address counts: 3 used, the denied one did not consume.
    let ip_only = s.get(&[("x-forwarded-for", "10.20.1.1")]).await;
    assert_eq!(ip_only.status, 200);
    assert_eq!(header(&ip_only.headers, "x-ratelimit-remaining"), "1");
}

#[tokio::test]
async fn envoy_reaches_the_rls_over_a_unix_socket() {
    limit_holds_through(stack_with(Rls::Unix).await).await;
}

#[tokio::test]
async fn envoy_reaches_the_rls_over_mtls() {
    limit_holds_through(stack_with(Rls::Mtls).await).await;
}

/// Five requests of one client pass, the sixth is denied by sluiced's answer.
async fn limit_holds_through(s: Stack) {
    let client = [("x-forwarded-for", "10.20.2.1")];
    for left in (0..5).rev() {
        let answer = s.get(&client).await;
        assert_eq!(answer.status, 200, "{}", s.envoy.log());
        assert_eq!(
            header(&answer.headers, "x-ratelimit-remaining"),
            left.to_string()
        );
    }
    let denied = s.get(&client).await;
    assert_eq!(denied.status, 429);
    assert_eq!(header(&denied.headers, "retry-after"), "12");
    assert_eq!(s.app.hits(), 5);
}
