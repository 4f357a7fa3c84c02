//! What a logon costs: connects N sessions one after another with NTLM and
//! with Kerberos (password credential) to the same server and reports the
//! first logon and the median of the rest, in milliseconds (NEGOTIATE,
//! SESSION_SETUP and key derivation; for Kerberos's first, also the AS and
//! TGS exchanges with the KDC). Used by `scripts/kerberos-trial`.
//!
//! ```text
//! logoncost ADDR SPN N      # SMB_USER, SMB_PASSWORD, SMB_DOMAIN from the environment
//! ```
//! KRB5_CONFIG must name the realm's KDC.

use std::sync::Arc;
use std::time::Instant;

use smb_auth::{KerberosCredentials, KerberosIdentity, KerberosSource};
use smb_client::{ClientConfig, Session, SmbAuth};

async fn series(cfg: &ClientConfig, n: usize) -> Result<(f64, f64), smb_client::Error> {
    let mut ms = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let s = Session::connect(cfg).await?;
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
        drop(s);
    }
    let first = ms[0];
    let mut rest = ms[1..].to_vec();
    rest.sort_by(f64::total_cmp);
    Ok((first, rest.get(rest.len() / 2).copied().unwrap_or(first)))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: logoncost ADDR SPN N   (SMB_USER, SMB_PASSWORD, SMB_DOMAIN from the environment)");
        std::process::exit(2);
    }
    let n: usize = args[3].parse()?;
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    let mut ntlm = ClientConfig::new(&args[1], &env("SMB_USER"), &env("SMB_PASSWORD"));
    ntlm.domain = env("SMB_DOMAIN");
    let mut krb = ntlm.clone();
    krb.spn = Some(args[2].clone());
    krb.auth = SmbAuth::Kerberos(Arc::new(KerberosIdentity::new(KerberosCredentials {
        principal: Some(env("SMB_USER")),
        source: KerberosSource::Password(env("SMB_PASSWORD")),
    })));
    let (nf, nm) = series(&ntlm, n.max(2)).await?;
    let (kf, km) = series(&krb, n.max(2)).await?;
    println!("| mechanism | first logon (ms) | median of the next {} (ms) |", n.max(2) - 1);
    println!("|---|---|---|");
    println!("| NTLM | {nf:.1} | {nm:.1} |");
    println!("| Kerberos (password) | {kf:.1} | {km:.1} |");
    Ok(())
}
