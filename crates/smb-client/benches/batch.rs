//! Micro-benchmark of the hot path: encode a batch of WRITEs into one
//! buffer and sign each message in place; verify and decode READ responses.
//! Beside each batch, `memcpy` copies the same bytes once: the machine's
//! limit for any path that touches every byte.
//! Run: `cargo bench -p smb-client --bench batch`.

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use smb_client::crypto::Signer;
use smb_proto::compound::ChainBuilder;
use smb_proto::create::FileId;
use smb_proto::header::{flags, Command, Header};
use smb_proto::io::{ReadResponse, WriteRequest};
use smb_proto::negotiate::SigningAlgorithm;

const IO: usize = 1 << 20;
const BATCH: usize = 16;

/// `count` WRITEs of `data` encoded one after another into `out` (each
/// with its transport header), each signed in place when `signer` is set.
fn encode_batch(out: &mut BytesMut, data: &[u8], count: usize, signer: Option<&Signer>) {
    let charge = data.len().div_ceil(64 << 10) as u16;
    for i in 0..count {
        let mut h = Header::request(Command::Write);
        h.message_id = (i * usize::from(charge)) as u64;
        h.credit_charge = charge;
        let body =
            WriteRequest { file_id: FileId { persistent: 1, volatile: 2 }, offset: (i * data.len()) as u64, data };
        out.extend_from_slice(&[0; 4]);
        let mut b = ChainBuilder::new();
        let start = b.push(out, &h, &body);
        if let Some(s) = signer {
            s.sign(&mut out[start..]);
        }
    }
}

fn read_response(len: usize, signer: &Signer) -> BytesMut {
    let mut h = Header::request(Command::Read);
    h.flags = flags::SERVER_TO_REDIR;
    let mut m = BytesMut::new();
    h.encode(&mut m);
    m.extend_from_slice(&17u16.to_le_bytes());
    m.extend_from_slice(&[80, 0]);
    m.extend_from_slice(&(len as u32).to_le_bytes());
    m.extend_from_slice(&[0; 8]);
    m.resize(80 + len, 0xAB);
    signer.sign(&mut m);
    m
}

/// A write batch of `count` x `io` bytes: unsigned, GMAC and CMAC, and
/// memcpy of the same bytes.
fn write_batch(c: &mut Criterion, count: usize, io: usize, group: &str) {
    let data = vec![0x5Au8; io];
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Bytes((io * count) as u64));
    for (name, alg) in
        [("unsigned", None), ("gmac", Some(SigningAlgorithm::AesGmac)), ("cmac", Some(SigningAlgorithm::AesCmac))]
    {
        let signer = alg.map(|a| Signer::new(a, &[9; 16]));
        let mut out = BytesMut::with_capacity(count * (io + 256));
        g.bench_function(name, |b| {
            b.iter(|| {
                out.clear();
                encode_batch(&mut out, &data, count, signer.as_ref());
                criterion::black_box(out.len())
            })
        });
    }
    let mut out = BytesMut::with_capacity(count * io);
    g.bench_function("memcpy", |b| {
        b.iter(|| {
            out.clear();
            for _ in 0..count {
                out.extend_from_slice(&data);
            }
            criterion::black_box(out.len())
        })
    });
    g.finish();
}

fn bench(c: &mut Criterion) {
    write_batch(c, BATCH, IO, "write_batch_16x1MiB");
    // The seed's own case: 64 WRITEs of 64 KiB, one buffer.
    write_batch(c, 64, 64 << 10, "write_batch_64x64KiB");

    let mut g = c.benchmark_group("read_response_8MiB");
    g.throughput(Throughput::Bytes(8 << 20));
    let signer = Signer::new(SigningAlgorithm::AesGmac, &[9; 16]);
    let mut msg = read_response(8 << 20, &signer);
    g.bench_function("verify_gmac_and_decode", |b| {
        b.iter(|| {
            assert!(signer.verify(&mut msg));
            let frozen: Bytes = Bytes::copy_from_slice(&msg[..128]);
            criterion::black_box(frozen.len())
        })
    });
    let frozen = msg.clone().freeze();
    g.bench_function("decode_zero_copy", |b| {
        b.iter(|| criterion::black_box(ReadResponse::decode(&frozen).unwrap().data.len()))
    });
    g.finish();

    // 64 READ answers of 64 KiB: decoded without copying their data (each
    // answer's payload is a slice of its frame), verified in place (GMAC),
    // and memcpy of the same payload bytes.
    let mut g = c.benchmark_group("read_responses_64x64KiB");
    g.throughput(Throughput::Bytes(64 * (64 << 10)));
    let mut msgs: Vec<BytesMut> = (0..64).map(|_| read_response(64 << 10, &signer)).collect();
    let frozen: Vec<Bytes> = msgs.iter().map(|m| m.clone().freeze()).collect();
    g.bench_function("decode_zero_copy", |b| {
        b.iter(|| {
            let n: usize = frozen.iter().map(|m| ReadResponse::decode(m).unwrap().data.len()).sum();
            criterion::black_box(n)
        })
    });
    g.bench_function("verify_gmac", |b| {
        b.iter(|| {
            let mut n = 0;
            for m in msgs.iter_mut() {
                assert!(signer.verify(m));
                n += m.len();
            }
            criterion::black_box(n)
        })
    });
    let mut out = BytesMut::with_capacity(64 * (64 << 10));
    g.bench_function("memcpy", |b| {
        b.iter(|| {
            out.clear();
            for m in &frozen {
                out.extend_from_slice(&m[80..]);
            }
            criterion::black_box(out.len())
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
