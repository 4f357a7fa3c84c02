//! Micro-benchmark of the hot path: encode a batch of WRITEs into one
//! buffer and sign each message in place; verify and decode READ responses.
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

fn encode_batch(out: &mut BytesMut, data: &[u8], signer: Option<&Signer>) {
    for i in 0..BATCH {
        let mut h = Header::request(Command::Write);
        h.message_id = (i * 16) as u64;
        h.credit_charge = 16;
        let body = WriteRequest { file_id: FileId { persistent: 1, volatile: 2 }, offset: (i * IO) as u64, data };
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

fn bench(c: &mut Criterion) {
    let data = vec![0x5Au8; IO];
    let mut g = c.benchmark_group("write_batch_16x1MiB");
    g.throughput(Throughput::Bytes((IO * BATCH) as u64));
    for (name, alg) in
        [("unsigned", None), ("gmac", Some(SigningAlgorithm::AesGmac)), ("cmac", Some(SigningAlgorithm::AesCmac))]
    {
        let signer = alg.map(|a| Signer::new(a, &[9; 16]));
        let mut out = BytesMut::with_capacity(BATCH * (IO + 256));
        g.bench_function(name, |b| {
            b.iter(|| {
                out.clear();
                encode_batch(&mut out, &data, signer.as_ref());
                criterion::black_box(out.len())
            })
        });
    }
    g.finish();

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
}

criterion_group!(benches, bench);
criterion_main!(benches);
