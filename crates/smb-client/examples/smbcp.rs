//! Copies one large file to or from a share through a single connection with
//! pipelined READs/WRITEs, and reports throughput and this process's CPU
//! time. Used by `scripts/bench-smb` beside `smbclient get/put`.
//!
//! ```text
//! smbcp get ADDR SHARE REMOTE LOCAL    # LOCAL may be /dev/null
//! smbcp put ADDR SHARE LOCAL REMOTE
//! ```
//! Credentials come from SMB_USER and SMB_PASSWORD; SMBCP_SIGN=1 signs every
//! message, SMBCP_ENCRYPT=1 encrypts, SMBCP_INFLIGHT_MIB sets the pipeline
//! byte budget (default 64).

use std::io::{Read, Write};
use std::time::Instant;

use smb_client::{ClientConfig, Session};
use smb_proto::create::{access, attributes, options, share, CreateRequest, Disposition};

fn cpu_seconds() -> f64 {
    // utime + stime of this process, from /proc/self/stat (clock ticks).
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 6 || !matches!(args[1].as_str(), "get" | "put") {
        eprintln!("usage: smbcp get|put ADDR SHARE SRC DST   (SMB_USER, SMB_PASSWORD from the environment)");
        std::process::exit(2);
    }
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    let mut cfg = ClientConfig::new(&args[2], &env("SMB_USER"), &env("SMB_PASSWORD"));
    cfg.require_signing = env("SMBCP_SIGN") == "1";
    cfg.require_encryption = env("SMBCP_ENCRYPT") == "1";
    let in_flight = env("SMBCP_INFLIGHT_MIB").parse::<usize>().unwrap_or(64) << 20;
    let session = Session::connect(&cfg).await?;
    let tree = session.tree_connect(&args[3]).await?;
    let start = Instant::now();
    let cpu0 = cpu_seconds();
    let bytes = if args[1] == "get" {
        let f = tree.open_read(&args[4]).await?;
        let mut out = std::io::BufWriter::with_capacity(8 << 20, std::fs::File::create(&args[5])?);
        let size = f.times.end_of_file;
        let n = tree
            .read_pipelined(f.file_id, 0, size, in_flight, |b| {
                out.write_all(&b).map_err(|e| smb_client::Error::Io(e.to_string()))
            })
            .await?;
        out.flush()?;
        tree.close(f.file_id).await?;
        n
    } else {
        let name = smb_client::tree::smb_path(&args[5]);
        let f = tree
            .create(&CreateRequest {
                name: &name,
                oplock_level: 0,
                desired_access: access::GENERIC_WRITE | access::GENERIC_READ,
                file_attributes: attributes::NORMAL,
                share_access: share::ALL,
                disposition: Disposition::OverwriteIf,
                options: options::NON_DIRECTORY_FILE,
                contexts: &[],
            })
            .await?;
        // Read the source on its own thread so disk reads overlap the
        // pipelined WRITEs; buffers go back and forth, so none is zeroed or
        // faulted in more than once.
        let (tx, mut rx) = tokio::sync::mpsc::channel::<(Vec<u8>, usize)>(4);
        let (back_tx, back_rx) = std::sync::mpsc::channel::<Vec<u8>>();
        for _ in 0..6 {
            back_tx.send(vec![0u8; 4 << 20]).expect("fresh channel");
        }
        let path = args[4].clone();
        let reader = std::thread::spawn(move || -> std::io::Result<()> {
            let mut src = std::fs::File::open(path)?;
            while let Ok(mut buf) = back_rx.recv() {
                let mut filled = 0;
                while filled < buf.len() {
                    let n = src.read(&mut buf[filled..])?;
                    if n == 0 {
                        break;
                    }
                    filled += n;
                }
                if filled == 0 || tx.blocking_send((buf, filled)).is_err() {
                    return Ok(());
                }
            }
            Ok(())
        });
        let mut w = tree.writer(f.file_id, 0, in_flight);
        while let Some((chunk, len)) = rx.recv().await {
            w.write(&chunk[..len]).await?;
            let _ = back_tx.send(chunk);
        }
        drop(back_tx);
        reader.join().expect("reader thread")?;
        let off = w.finish().await?;
        tree.close(f.file_id).await?;
        off
    };
    let secs = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    println!(
        "{} {} bytes in {:.3} s = {:.1} MiB/s, cpu {:.3} s ({:.3} cpu-s/GiB)",
        args[1],
        bytes,
        secs,
        bytes as f64 / secs / 1048576.0,
        cpu,
        cpu / (bytes as f64 / (1u64 << 30) as f64)
    );
    Ok(())
}
