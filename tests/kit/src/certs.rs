//! Certificates made for a test, in a temporary directory: a CA, a server certificate for
//! `localhost` and `127.0.0.1`, a client certificate, a second CA unrelated to the first (with
//! a client certificate of its own), a server certificate that has expired and one for another
//! name. The files are PEM, as redis-server, curl, Envoy and sluiced read them.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};
use tempfile::TempDir;

/// A certificate file and its key file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The certificates of one test (see the module doc). The files live as long as this value.
#[derive(Debug)]
pub struct Certs {
    dir: TempDir,
    ca: CertifiedIssuer<'static, KeyPair>,
    /// The CA's certificate (the bundle clients and servers trust).
    pub ca_file: PathBuf,
    /// For `localhost` and `127.0.0.1`, signed by the CA.
    pub server: Pair,
    /// A client certificate signed by the CA.
    pub client: Pair,
    /// The other CA's certificate.
    pub other_ca_file: PathBuf,
    /// A client certificate signed by the other CA.
    pub other_client: Pair,
    /// For `localhost` and `127.0.0.1`, signed by the CA, valid only in 2001.
    pub expired: Pair,
    /// Signed by the CA for `elsewhere.invalid` only.
    pub wrong_name: Pair,
}

/// The SANs of a server certificate for this machine's loopback.
pub const LOCAL_NAMES: &[&str] = &["localhost", "127.0.0.1"];

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("CA")
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

impl Certs {
    /// Makes every certificate in a fresh temporary directory.
    pub fn new() -> Certs {
        let dir = tempfile::tempdir().expect("temp dir");
        let ca = ca("sluice test CA");
        let other = ca_issuer_file(&dir, "other-ca", "unrelated test CA");
        let ca_file = dir.path().join("ca.pem");
        write(&ca_file, &ca.pem());
        let mut certs = Certs {
            server: Pair {
                cert: PathBuf::new(),
                key: PathBuf::new(),
            },
            client: Pair {
                cert: PathBuf::new(),
                key: PathBuf::new(),
            },
            other_client: issue(&dir, &other.1, "other-client", &[], Use::Client, false),
            other_ca_file: other.0,
            expired: Pair {
                cert: PathBuf::new(),
                key: PathBuf::new(),
            },
            wrong_name: Pair {
                cert: PathBuf::new(),
                key: PathBuf::new(),
            },
            ca_file,
            ca,
            dir,
        };
        certs.server = certs.issue_server("server", LOCAL_NAMES);
        certs.client = issue(&certs.dir, &certs.ca, "client", &[], Use::Client, false);
        certs.expired = issue(
            &certs.dir,
            &certs.ca,
            "expired",
            LOCAL_NAMES,
            Use::Server,
            true,
        );
        certs.wrong_name = certs.issue_server("wrong-name", &["elsewhere.invalid"]);
        certs
    }

    /// A new server certificate for `names`, signed by the CA, as `<stem>.pem` and
    /// `<stem>.key` (a rotation issues one and swaps it in).
    pub fn issue_server(&self, stem: &str, names: &[&str]) -> Pair {
        issue(&self.dir, &self.ca, stem, names, Use::Server, false)
    }

    /// A new client certificate signed by the CA.
    pub fn issue_client(&self, stem: &str) -> Pair {
        issue(&self.dir, &self.ca, stem, &[], Use::Client, false)
    }

    /// The directory of the files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Default for Certs {
    fn default() -> Self {
        Certs::new()
    }
}

fn ca_issuer_file(
    dir: &TempDir,
    stem: &str,
    name: &str,
) -> (PathBuf, CertifiedIssuer<'static, KeyPair>) {
    let issuer = ca(name);
    let path = dir.path().join(format!("{stem}.pem"));
    write(&path, &issuer.pem());
    (path, issuer)
}

#[derive(Clone, Copy)]
enum Use {
    Server,
    Client,
}

fn issue(
    dir: &TempDir,
    ca: &CertifiedIssuer<'static, KeyPair>,
    stem: &str,
    names: &[&str],
    usage: Use,
    expired: bool,
) -> Pair {
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let mut params = CertificateParams::new(names).expect("params");
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, stem);
    params.distinguished_name = dn;
    params.extended_key_usages = vec![match usage {
        Use::Server => ExtendedKeyUsagePurpose::ServerAuth,
        Use::Client => ExtendedKeyUsagePurpose::ClientAuth,
    }];
    if expired {
        params.not_before = rcgen::date_time_ymd(2001, 1, 1);
        params.not_after = rcgen::date_time_ymd(2001, 12, 31);
    }
    let key = KeyPair::generate().expect("key");
    let cert = params.signed_by(&key, ca).expect("signed certificate");
    let pair = Pair {
        cert: dir.path().join(format!("{stem}.pem")),
        key: dir.path().join(format!("{stem}.key")),
    };
    write(&pair.cert, &cert.pem());
    write(&pair.key, &key.serialize_pem());
    pair
}
