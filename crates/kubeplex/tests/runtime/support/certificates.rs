//! Certificates for the tests' own TLS servers.

use rcgen::{BasicConstraints, Certificate, CertificateParams, IsCa, Issuer, KeyPair};

/// A CA's certificate, and a serving certificate for `localhost` and `127.0.0.1` it signed with that
/// certificate's key.
pub fn localhost() -> (Certificate, Certificate, KeyPair) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let serving =
        CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    let serving = serving.signed_by(&key, &issuer).unwrap();
    (ca_cert, serving, key)
}
