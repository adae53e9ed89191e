//! `axum-app`: serves the example on 127.0.0.1:3000 (or `$APP_ADDR`), rate-limited by the
//! sluiced on `$SLUICE_SOCKET` (default `/tmp/sluiced.sock`) under policy `public`.
//!
//! ```sh
//! sluiced &                                   # the built-in policies, UDS /tmp/sluiced.sock
//! cargo run -p sluice-axum-app &
//! curl -i -H 'Authorization: Bearer ann' http://127.0.0.1:3000/orders
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sluice_client::Client;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let socket = std::env::var("SLUICE_SOCKET").unwrap_or_else(|_| "/tmp/sluiced.sock".into());
    let addr = std::env::var("APP_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    // A check is a local round trip: past 50 ms the daemon is as good as down.
    let client = Arc::new(Client::unix(&socket).with_timeout(Duration::from_millis(50)));
    let app = sluice_axum_app::app(client, "public")
        .await
        .with_context(|| format!("asking sluiced on {socket}"))?;
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    println!("axum-app on http://{addr}, limited by sluiced on {socket}");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
