//! Tests of `precheck.rs`.
use super::*;

fn rules() -> Rules {
    Rules { region: "us-east-1".into(), sigv2: true }
}

fn at(s: &str) -> OffsetDateTime {
    parse_amz_date(s).unwrap()
}

fn get(uri: &str, headers: &[(&str, &str)]) -> http::Request<()> {
    let mut b = http::Request::builder().uri(uri);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(()).unwrap()
}

const V4: &str =
    "AWS4-HMAC-SHA256 Credential=AK/20261201/us-east-1/s3/aws4_request, SignedHeaders=host;date, Signature=00";

#[test]
fn only_an_unsigned_chunked_put_of_unknown_length_is_admitted() {
    let put = |headers: &[(&str, &str)]| {
        let mut r = get("/b/k", headers);
        *r.method_mut() = http::Method::PUT;
        r
    };
    let unsigned = ("x-amz-content-sha256", "UNSIGNED-PAYLOAD");
    let chunked = ("transfer-encoding", "chunked");
    let mut r = put(&[unsigned, chunked]);
    assert!(admit_undeclared_length(&mut r));
    assert_eq!(r.headers()["content-length"], "0");
    assert!(r.extensions().get::<UndeclaredLength>().is_some());
    // A declared length, a signed payload hash, or no chunking: as sent.
    for headers in [
        &[unsigned, chunked, ("content-length", "5")][..],
        &[("x-amz-content-sha256", "e3b0c442"), chunked][..],
        &[unsigned][..],
    ] {
        let mut r = put(headers);
        assert!(!admit_undeclared_length(&mut r), "{headers:?}");
        assert!(r.extensions().get::<UndeclaredLength>().is_none());
    }
    // A signature that covers content-length was made with one: as sent.
    let signed_length =
        "AWS4-HMAC-SHA256 Credential=AK/20261201/us-east-1/s3/aws4_request, SignedHeaders=content-length;host;x-amz-date, Signature=00";
    let mut r = put(&[unsigned, chunked, ("authorization", signed_length)]);
    assert!(!admit_undeclared_length(&mut r), "content-length was signed");
    let mut r = put(&[unsigned, chunked, ("authorization", V4)]);
    assert!(admit_undeclared_length(&mut r), "a signature without content-length");
    let mut part = get("/b/k?partNumber=2&uploadId=u1", &[unsigned, chunked]);
    *part.method_mut() = http::Method::PUT;
    assert!(admit_undeclared_length(&mut part));
    // XML subresources and bucket PUTs are read whole by s3s: as sent.
    for uri in ["/b/k?tagging", "/b?cors", "/b"] {
        let mut r = get(uri, &[unsigned, chunked]);
        *r.method_mut() = http::Method::PUT;
        assert!(!admit_undeclared_length(&mut r), "{uri}");
    }
}

#[test]
fn paths_must_decode_to_utf8() {
    assert!(path_is_utf8("/b/caf%C3%A9/k%20ey"));
    assert!(!path_is_utf8("/b/%AE%8A-"));
}

#[test]
fn sigv4_scope_must_name_the_region() {
    let wrong = V4.replace("us-east-1", "eu-west-1");
    let e = rules().check(&mut get("/b", &[("authorization", &wrong)]), at("20261201T100000Z")).unwrap_err();
    assert_eq!((e.status.as_u16(), e.code), (400, "AuthorizationHeaderMalformed"));
    assert_eq!(
        e.message,
        "The authorization header is malformed; the region 'eu-west-1' is wrong; expecting 'us-east-1'"
    );
    assert!(rules().check(&mut get("/b", &[("authorization", V4)]), at("20261201T100000Z")).is_ok());
}

#[test]
fn a_sigv4_request_dated_by_date_gets_x_amz_date() {
    let mut r = get("/b", &[("authorization", V4), ("date", "Tue, 01 Dec 2026 10:00:00 GMT")]);
    rules().check(&mut r, at("20261201T100000Z")).unwrap();
    assert_eq!(r.headers()["x-amz-date"], "20261201T100000Z");
    let mut r = get("/b", &[("authorization", V4), ("x-amz-date", "20261201T090000Z"), ("date", "")]);
    rules().check(&mut r, at("20261201T100000Z")).unwrap();
    assert_eq!(r.headers()["x-amz-date"], "20261201T090000Z", "an existing x-amz-date is kept");
}

#[test]
fn presigned_lifetimes() {
    let url = |exp: &str| {
        format!("/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AK%2F20261201%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20261201T100000Z&X-Amz-Expires={exp}&X-Amz-Signature=00")
    };
    let now = at("20261201T100500Z");
    assert!(rules().check(&mut get(&url("3600"), &[]), now).is_ok());
    assert!(rules().check(&mut get(&url("604800"), &[]), now).is_ok());
    for (exp, code, msg) in [
        (
            "604801",
            "AuthorizationQueryParametersError",
            "X-Amz-Expires must be less than a week (in seconds) that is 604800",
        ),
        ("-1", "AuthorizationQueryParametersError", "X-Amz-Expires must be non-negative"),
        ("60", "AccessDenied", "Request has expired"),
    ] {
        let e = rules().check(&mut get(&url(exp), &[]), now).unwrap_err();
        assert_eq!((e.status.as_u16(), e.code, e.message.as_str()), (403, code, msg), "{exp}");
    }
    let wrong = url("60").replace("us-east-1", "ap-south-1");
    assert_eq!(rules().check(&mut get(&wrong, &[]), now).unwrap_err().code, "AuthorizationQueryParametersError");
}

#[test]
fn sigv2_needs_a_fresh_date_and_can_be_switched_off() {
    let now = at("20261201T100000Z");
    let v2 = |date: &str| get("/b", &[("authorization", "AWS AK:c2ln"), ("date", date)]);
    assert!(rules().check(&mut v2("Tue, 01 Dec 2026 10:14:00 GMT"), now).is_ok());
    let e = rules().check(&mut v2("Tue, 01 Dec 2026 09:40:00 GMT"), now).unwrap_err();
    assert_eq!((e.status.as_u16(), e.code), (403, "RequestTimeTooSkewed"));
    let off = Rules { sigv2: false, ..rules() };
    assert_eq!(off.check(&mut v2("Tue, 01 Dec 2026 10:00:00 GMT"), now).unwrap_err().code, "InvalidRequest");
    let presigned = "/b/k?AWSAccessKeyId=AK&Expires=1796119200&Signature=c2ln";
    assert!(rules().check(&mut get(presigned, &[]), now).is_ok());
    assert_eq!(off.check(&mut get(presigned, &[]), now).unwrap_err().code, "InvalidRequest");
}

#[test]
fn signature_names_are_read_decoded() {
    // `Signatur%65` is `Signature` to s3s: it must not slip past
    // `--sigv2 off`, nor past the presigned-plus-Authorization check.
    let now = at("20261201T100000Z");
    let off = Rules { sigv2: false, ..rules() };
    let v2 = "/b/k?AWSAccessKeyId=AK&Expires=1796119200&Signatur%65=c2ln";
    assert_eq!(off.check(&mut get(v2, &[]), now).unwrap_err().code, "InvalidRequest");
    let v4 = "/b/k?X-Amz-Algorith%6D=AWS4-HMAC-SHA256&X-Amz-Signature=00";
    let e = rules().check(&mut get(v4, &[("authorization", V4)]), now).unwrap_err();
    assert_eq!(e.code, "InvalidArgument");
    assert_eq!(decoded_name("Signatur%65=x"), "Signature");
    assert_eq!(decoded_name("delete"), "delete");
}

#[test]
fn a_presigned_url_with_an_authorization_header_is_refused() {
    let now = at("20261201T100500Z");
    let v4 = "/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AK%2F20261201%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20261201T100000Z&X-Amz-Expires=60&X-Amz-Signature=00";
    let v2 = "/b/k?AWSAccessKeyId=AK&Expires=1796119200&Signature=c2ln";
    let off = Rules { sigv2: false, ..rules() };
    for (url, rules) in [(v4, rules()), (v2, off)] {
        for auth in ["Bearer x", V4, "AWS AK:c2ln"] {
            let e = rules.check(&mut get(url, &[("authorization", auth)]), now).unwrap_err();
            assert_eq!((e.status.as_u16(), e.code), (400, "InvalidArgument"), "{url} with {auth}");
            assert!(e.message.starts_with("Only one auth mechanism allowed"));
        }
    }
    // A signature-like word elsewhere in the query is no presigned URL.
    let listing = "/b?list-type=2&prefix=Signature";
    assert!(rules().check(&mut get(listing, &[("authorization", V4)]), now).is_ok());
}
