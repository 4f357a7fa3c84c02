//! TLS for the S3 listener (rustls): the certificate chain and key come
//! from PEM files, ALPN offers h2 and http/1.1, and both files are read
//! again on SIGHUP. A reload that fails (unreadable file, key that does not
//! match the certificate) is logged and the certificate in force stays.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;

/// The certificate and key files of a TLS listener, and what was last
/// loaded from them.
#[derive(Debug)]
pub struct Certificates {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
}

impl Certificates {
    /// Loads `cert` (PEM, end-entity certificate first, then any
    /// intermediates) and `key` (PEM: PKCS#8, PKCS#1 or SEC1).
    ///
    /// Errors: a one-line reason naming the file (unreadable, no
    /// certificate or key in it, a key file every user may read while the
    /// gateway runs as root, a key the provider cannot use, or a key that
    /// does not belong to the certificate).
    pub fn load(cert: &Path, key: &Path) -> Result<Arc<Certificates>, String> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let current = RwLock::new(Arc::new(read_pair(cert, key, &provider)?));
        Ok(Arc::new(Certificates { cert: cert.to_path_buf(), key: key.to_path_buf(), provider, current }))
    }

    /// Reads both files again and serves the new pair to new connections.
    ///
    /// Errors: as [`Certificates::load`]; the pair in force then stays.
    pub fn reload(&self) -> Result<(), String> {
        let pair = read_pair(&self.cert, &self.key, &self.provider)?;
        *self.current.write().unwrap() = Arc::new(pair);
        Ok(())
    }

    /// An acceptor for TLS 1.2 and 1.3 connections that always serves the
    /// pair last loaded, with ALPN `h2` and `http/1.1`.
    ///
    /// Errors: the provider supports no safe protocol version (cannot
    /// happen with the built-in provider).
    pub fn acceptor(self: &Arc<Self>) -> Result<TlsAcceptor, String> {
        let mut config = rustls::ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().unwrap().clone())
    }
}

/// Reads and checks one certificate chain and its key.
fn read_pair(cert: &Path, key: &Path, provider: &CryptoProvider) -> Result<CertifiedKey, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| format!("TLS certificate {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("TLS certificate {}: no certificate in the file", cert.display()));
    }
    // Held to its mode as the other secret files are, on each reload too.
    crate::secret_files::check_secret_file("TLS key", key)?;
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => {
            format!("TLS key {}: no private key in the file (PEM: PKCS#8, PKCS#1 or SEC1)", key.display())
        }
        e => format!("TLS key {}: {e}", key.display()),
    })?;
    CertifiedKey::from_der(chain, private, provider).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => {
            format!("TLS key {} does not belong to the certificate in {}", key.display(), cert.display())
        }
        other => format!("TLS key {}: {other}", key.display()),
    })
}
