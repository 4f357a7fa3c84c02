//! The MD5 of a PUT body (its ETag), the largest CPU cost of a PUT: the
//! `md-5` crate's Rust beside OpenSSL's assembly, which the store uses
//! (`store/verify.rs`), over 8 MiB pieces as a body arrives, and `memcpy`
//! of the same bytes for scale.
//! Run: `cargo bench -p smbgate --bench body_md5`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use md5::Digest;

const PIECE: usize = 8 << 20;

fn md5_of_a_body(c: &mut Criterion) {
    let data: Vec<u8> = (0..PIECE).map(|i| (i % 251) as u8).collect();
    let mut g = c.benchmark_group("md5 of 8 MiB");
    g.throughput(Throughput::Bytes(PIECE as u64));
    g.sample_size(20);
    g.bench_function("md-5 (Rust)", |b| b.iter(|| md5::Md5::digest(std::hint::black_box(&data))));
    g.bench_function("openssl", |b| {
        b.iter(|| openssl::hash::hash(openssl::hash::MessageDigest::md5(), std::hint::black_box(&data)).unwrap())
    });
    let mut out = vec![0u8; PIECE];
    g.bench_function("memcpy", |b| b.iter(|| out.copy_from_slice(std::hint::black_box(&data))));
    g.finish();
}

criterion_group!(benches, md5_of_a_body);
criterion_main!(benches);
