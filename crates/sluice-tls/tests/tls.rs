//! The PEM errors name the field and file and quote nothing of it; a handshake against the
//! test certificates fails for each reason the operator is told.

#![allow(clippy::unwrap_used)] // tests unwrap, helpers included

use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::ServerName;
use sluice_testkit::certs::{Certs, Pair};
use sluice_tls::{ClientFiles, Reason, ServerFiles, client_config, reason_of, server_config};

fn server_files(pair: &Pair, client_ca: Option<&Path>) -> ServerFiles {
    ServerFiles {
        cert_file: pair.cert.clone(),
        key_file: pair.key.clone(),
        client_ca_file: client_ca.map(Path::to_path_buf),
    }
}

#[test]
fn pem_errors_name_field_and_file_and_quote_no_key() {
    let certs = Certs::new();
    let missing = certs.dir().join("missing.pem");
    let files = ServerFiles {
        cert_file: missing.clone(),
        ..server_files(&certs.server, None)
    };
    let err = server_config(&files, &[]).unwrap_err().to_string();
    assert!(err.starts_with("listen.tls.cert_file: "), "{err}");
    assert!(err.contains(&missing.display().to_string()), "{err}");
    assert!(err.contains("cannot read"), "{err}");

    // A key file given as the certificate: no CERTIFICATE section, and none of the key shown.
    let key_text = std::fs::read_to_string(&certs.server.key).unwrap();
    let files = ServerFiles {
        cert_file: certs.server.key.clone(),
        ..server_files(&certs.server, None)
    };
    let err = server_config(&files, &[]).unwrap_err().to_string();
    assert!(err.contains("no CERTIFICATE section"), "{err}");
    let body_line = key_text.lines().nth(1).unwrap();
    assert!(!err.contains(body_line), "{err}");

    // Garbage in the key file.
    let broken = certs.dir().join("broken.key");
    std::fs::write(&broken, "-----BEGIN PRIVATE KEY-----\n!!!!\n").unwrap();
    let files = ServerFiles {
        key_file: broken,
        ..server_files(&certs.server, None)
    };
    let err = server_config(&files, &[]).unwrap_err().to_string();
    assert!(err.starts_with("listen.tls.key_file: "), "{err}");
    assert!(err.contains("not valid PEM"), "{err}");

    // A key that is not the certificate's.
    let files = ServerFiles {
        key_file: certs.client.key.clone(),
        ..server_files(&certs.server, None)
    };
    let err = server_config(&files, &[]).unwrap_err().to_string();
    assert!(err.contains("does not fit listen.tls.cert_file"), "{err}");

    // A client's certificate without its key.
    let err = client_config(
        "backend.tls",
        &ClientFiles {
            ca_file: Some(certs.ca_file.clone()),
            cert_file: Some(certs.client.cert.clone()),
            key_file: None,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.starts_with("backend.tls.key_file: "), "{err}");
}

/// Handshakes `client` against `server` over an in-memory pipe: the client's failure reason
/// and the server's.
async fn handshake(
    server: rustls::ServerConfig,
    client: rustls::ClientConfig,
    name: &str,
) -> (Option<Reason>, Option<Reason>) {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
    let name = ServerName::try_from(name.to_owned()).unwrap();
    let (server, client) = tokio::join!(
        async move {
            let mut stream = acceptor.accept(a).await?;
            // TLS 1.3: the client's certificate is judged after the client's handshake ended;
            // a read sees the server's verdict.
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut byte = [0u8; 1];
            stream.read_exact(&mut byte).await?;
            stream.write_all(&byte).await?;
            stream.flush().await?;
            Ok::<_, std::io::Error>(())
        },
        async move {
            let mut stream = connector.connect(name, b).await?;
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            stream.write_all(b"x").await?;
            let mut byte = [0u8; 1];
            stream.read_exact(&mut byte).await?;
            Ok::<_, std::io::Error>(())
        }
    );
    (
        client.err().map(|e| reason_of(&e)),
        server.err().map(|e| reason_of(&e)),
    )
}

fn client(ca: &Path, pair: Option<&Pair>) -> rustls::ClientConfig {
    client_config(
        "backend.tls",
        &ClientFiles {
            ca_file: Some(ca.to_path_buf()),
            cert_file: pair.map(|p| p.cert.clone()),
            key_file: pair.map(|p| p.key.clone()),
        },
    )
    .unwrap()
}

#[tokio::test]
async fn each_failed_handshake_is_named() {
    let certs = Certs::new();
    let plain = || server_config(&server_files(&certs.server, None), &[]).unwrap();
    let (c, _) = handshake(plain(), client(&certs.other_ca_file, None), "localhost").await;
    assert_eq!(c, Some(Reason::UnknownAuthority));
    let (c, _) = handshake(plain(), client(&certs.ca_file, None), "elsewhere.example").await;
    assert_eq!(c, Some(Reason::NameMismatch));
    let expired = server_config(&server_files(&certs.expired, None), &[]).unwrap();
    let (c, _) = handshake(expired, client(&certs.ca_file, None), "localhost").await;
    assert_eq!(c, Some(Reason::Expired));

    let mtls = || server_config(&server_files(&certs.server, Some(&certs.ca_file)), &[]).unwrap();
    let (_, s) = handshake(mtls(), client(&certs.ca_file, None), "localhost").await;
    assert_eq!(s, Some(Reason::ClientCertificateRequired));
    let (_, s) = handshake(
        mtls(),
        client(&certs.ca_file, Some(&certs.other_client)),
        "127.0.0.1",
    )
    .await;
    assert_eq!(s, Some(Reason::UnknownAuthority));
    let (c, s) = handshake(
        mtls(),
        client(&certs.ca_file, Some(&certs.client)),
        "127.0.0.1",
    )
    .await;
    assert_eq!((c, s), (None, None));
}
