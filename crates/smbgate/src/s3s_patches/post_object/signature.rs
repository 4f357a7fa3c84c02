//! Who signed a POST Object form: the policy document, signed as AWS's
//! browser-based uploads sign it. SigV4: `x-amz-signature` is the hex
//! HMAC-SHA256 of the base64 policy under the SigV4 signing key of
//! `x-amz-credential`'s scope. SigV2: `signature` is the base64
//! HMAC-SHA1 of the base64 policy under the secret key. A form with neither
//! is anonymous.

use aws_lc_rs::hmac;
use s3s::{S3Error, S3ErrorCode, S3Result};
use subtle::ConstantTimeEq;

use super::form::Fields;

/// How a form is signed, read from its fields (names in lower case).
#[derive(Debug, PartialEq, Eq)]
pub enum Scheme<'a> {
    /// No signature fields: an anonymous upload.
    Anonymous,
    /// `x-amz-signature` with its algorithm, credential and date.
    V4 {
        /// The access key of `x-amz-credential`.
        access_key: &'a str,
        /// The credential scope's date (`YYYYMMDD`).
        date: &'a str,
        /// The credential scope's region.
        region: &'a str,
        /// The credential scope's service.
        service: &'a str,
        /// The hex signature.
        signature: &'a str,
    },
    /// `AWSAccessKeyId` and `signature`.
    V2 {
        /// The access key.
        access_key: &'a str,
        /// The base64 signature.
        signature: &'a str,
    },
}

fn invalid_argument(message: impl Into<String>) -> S3Error {
    S3Error::with_message(S3ErrorCode::InvalidArgument, message.into())
}

fn missing(name: &str) -> S3Error {
    invalid_argument(format!(
        "Bucket POST must contain a field named '{name}'.  If it is specified, please check the order of the fields."
    ))
}

impl<'a> Scheme<'a> {
    /// The scheme `fields` use, checked for shape: a SigV4 form names the
    /// algorithm AWS4-HMAC-SHA256, a credential `KEY/YYYYMMDD/REGION/
    /// SERVICE/aws4_request` and an `x-amz-date` on the scope's day; a
    /// signed form carries its policy.
    ///
    /// Errors: 400 InvalidArgument for a missing or malformed field (a
    /// SigV2 form when `sigv2` is off is refused as a SigV2 request is).
    pub fn of(fields: &'a Fields, sigv2: bool) -> S3Result<Scheme<'a>> {
        if let Some(signature) = fields.get("x-amz-signature") {
            let algorithm = fields.get("x-amz-algorithm").ok_or_else(|| missing("x-amz-algorithm"))?;
            if algorithm != "AWS4-HMAC-SHA256" {
                return Err(invalid_argument(format!("Unsupported x-amz-algorithm: {algorithm}")));
            }
            let credential = fields.get("x-amz-credential").ok_or_else(|| missing("x-amz-credential"))?;
            let date = fields.get("x-amz-date").ok_or_else(|| missing("x-amz-date"))?;
            fields.get("policy").ok_or_else(|| missing("policy"))?;
            let parts: Vec<&str> = credential.split('/').collect();
            let [access_key, scope_date, region, service, "aws4_request"] = parts[..] else {
                return Err(invalid_argument(format!("Invalid x-amz-credential: {credential}")));
            };
            let dated = time::PrimitiveDateTime::parse(date, AMZ_DATE).is_ok();
            if !dated || !date.starts_with(scope_date) || access_key.is_empty() {
                return Err(invalid_argument(format!("Invalid x-amz-date or credential scope date: {date}")));
            }
            return Ok(Scheme::V4 { access_key, date: scope_date, region, service, signature });
        }
        if let Some(signature) = fields.get("signature") {
            if !sigv2 {
                return Err(S3Error::with_message(
                    S3ErrorCode::InvalidRequest,
                    "SigV2 is switched off on this endpoint (--sigv2 off); sign with AWS4-HMAC-SHA256",
                ));
            }
            let access_key = fields.get("awsaccesskeyid").ok_or_else(|| missing("AWSAccessKeyId"))?;
            fields.get("policy").ok_or_else(|| missing("policy"))?;
            return Ok(Scheme::V2 { access_key, signature });
        }
        if fields.get("policy").is_some() || fields.get("awsaccesskeyid").is_some() {
            return Err(missing(if fields.get("policy").is_some() { "x-amz-signature" } else { "signature" }));
        }
        Ok(Scheme::Anonymous)
    }

    /// The access key that signed, if any.
    pub fn access_key(&self) -> Option<&'a str> {
        match self {
            Scheme::Anonymous => None,
            Scheme::V4 { access_key, .. } | Scheme::V2 { access_key, .. } => Some(access_key),
        }
    }

    /// Checks the signature of `policy` (the base64 text as sent) with
    /// `secret`. A SigV4 scope must name `region` and the service `s3`.
    ///
    /// Errors: 400 AuthorizationHeaderMalformed for another region or
    /// service; 403 SignatureDoesNotMatch.
    pub fn verify(&self, policy: &str, secret: &str, region: &str) -> S3Result<()> {
        let matches = match self {
            Scheme::Anonymous => return Ok(()),
            Scheme::V4 { date, region: scope_region, service, signature, .. } => {
                if *scope_region != region || *service != "s3" {
                    return Err(S3Error::with_message(
                        S3ErrorCode::AuthorizationHeaderMalformed,
                        format!("the credential scope names {scope_region}/{service}; this endpoint is {region}/s3"),
                    ));
                }
                let expected = hex::encode(sigv4(secret, date, region, policy.as_bytes()));
                expected.as_bytes().ct_eq(signature.to_ascii_lowercase().as_bytes()).into()
            }
            Scheme::V2 { signature, .. } => {
                let expected = crate::s3s_patches::sigv2::signature_of(secret, policy);
                expected.as_bytes().ct_eq(signature.as_bytes()).into()
            }
        };
        match matches {
            true => Ok(()),
            false => Err(S3Error::with_message(
                S3ErrorCode::SignatureDoesNotMatch,
                "The request signature we calculated does not match the signature you provided. \
                 Check your key and signing method.",
            )),
        }
    }
}

/// `x-amz-date`'s format, `YYYYMMDD'T'HHMMSS'Z'`.
const AMZ_DATE: &[time::format_description::FormatItem<'static>] =
    time::macros::format_description!("[year][month][day]T[hour][minute][second]Z");

/// HMAC-SHA256 of `data` under the SigV4 signing key of `secret` for the
/// scope `date`/`region`/s3/aws4_request.
fn sigv4(secret: &str, date: &str, region: &str, data: &[u8]) -> Vec<u8> {
    let step = |key: &[u8], msg: &[u8]| hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), msg).as_ref().to_vec();
    let k_date = step(format!("AWS4{secret}").as_bytes(), date.as_bytes());
    let k_region = step(&k_date, region.as_bytes());
    let k_service = step(&k_region, b"s3");
    let k_signing = step(&k_service, b"aws4_request");
    step(&k_signing, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        Fields::from_pairs(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn sigv4_matches_aws_s_post_example() {
        // AWS's worked example of a browser-based upload signed with SigV4
        // (the example keys of the SigV4 documentation).
        let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
        let policy = "eyAiZXhwaXJhdGlvbiI6ICIyMDE1LTEyLTMwVDEyOjAwOjAwLjAwMFoiLA0KICAiY29uZGl0aW9ucyI6IFsNCiAgICB7ImJ1Y2tldCI6ICJzaWd2NGV4YW1wbGVidWNrZXQifSwNCiAgICBbInN0YXJ0cy13aXRoIiwgIiRrZXkiLCAidXNlci91c2VyMS8iXSwNCiAgICB7ImFjbCI6ICJwdWJsaWMtcmVhZCJ9LA0KICAgIHsic3VjY2Vzc19hY3Rpb25fcmVkaXJlY3QiOiAiaHR0cDovL3NpZ3Y0ZXhhbXBsZWJ1Y2tldC5zMy5hbWF6b25hd3MuY29tL3N1Y2Nlc3NmdWxfdXBsb2FkLmh0bWwifSwNCiAgICBbInN0YXJ0cy13aXRoIiwgIiRDb250ZW50LVR5cGUiLCAiaW1hZ2UvIl0sDQogICAgeyJ4LWFtei1tZXRhLXV1aWQiOiAiMTQzNjUxMjM2NTEyNzQifSwNCiAgICB7IngtYW16LXNlcnZlci1zaWRlLWVuY3J5cHRpb24iOiAiQUVTMjU2In0sDQogICAgWyJzdGFydHMtd2l0aCIsICIkeC1hbXotbWV0YS10YWciLCAiIl0sDQoNCiAgICB7IngtYW16LWNyZWRlbnRpYWwiOiAiQUtJQUlPU0ZPRE5ON0VYQU1QTEUvMjAxNTEyMjkvdXMtZWFzdC0xL3MzL2F3czRfcmVxdWVzdCJ9LA0KICAgIHsieC1hbXotYWxnb3JpdGhtIjogIkFXUzQtSE1BQy1TSEEyNTYifSwNCiAgICB7IngtYW16LWRhdGUiOiAiMjAxNTEyMjlUMDAwMDAwWiIgfQ0KICBdDQp9";
        let f = fields(&[
            ("x-amz-credential", "AKIAIOSFODNN7EXAMPLE/20151229/us-east-1/s3/aws4_request"),
            ("x-amz-algorithm", "AWS4-HMAC-SHA256"),
            ("x-amz-date", "20151229T000000Z"),
            ("policy", policy),
            ("x-amz-signature", "8afdbf4008c03f22c2cd3cdb72e4afbb1f6a588f3255ac628749a66d7f09699e"),
        ]);
        let scheme = Scheme::of(&f, true).unwrap();
        assert_eq!(scheme.access_key(), Some("AKIAIOSFODNN7EXAMPLE"));
        scheme.verify(policy, secret, "us-east-1").unwrap();
        let e = scheme.verify(policy, "another secret", "us-east-1").unwrap_err();
        assert_eq!(e.code(), &S3ErrorCode::SignatureDoesNotMatch);
        let e = scheme.verify(policy, secret, "eu-west-1").unwrap_err();
        assert_eq!(e.code(), &S3ErrorCode::AuthorizationHeaderMalformed);
    }

    #[test]
    fn sigv2_is_base64_hmac_sha1_of_the_policy() {
        let f = fields(&[("awsaccesskeyid", "AK"), ("policy", "cG9saWN5"), ("signature", "bm9wZQ==")]);
        assert_eq!(Scheme::of(&f, false).unwrap_err().code(), &S3ErrorCode::InvalidRequest);
        let scheme = Scheme::of(&f, true).unwrap();
        assert_eq!(scheme.verify("cG9saWN5", "secret", "r").unwrap_err().code(), &S3ErrorCode::SignatureDoesNotMatch);
        // HMAC-SHA1("secret", "cG9saWN5"), computed with Python's hmac module.
        let good = fields(&[("awsaccesskeyid", "AK"), ("policy", "cG9saWN5"), ("signature", SIGV2_EXAMPLE)]);
        Scheme::of(&good, true).unwrap().verify("cG9saWN5", "secret", "r").unwrap();
    }

    const SIGV2_EXAMPLE: &str = "xjcOd3+I0tu58AF8jUmwdfvwgBU=";

    #[test]
    fn shapes_that_are_refused() {
        assert_eq!(Scheme::of(&fields(&[("key", "k")]), true).unwrap(), Scheme::Anonymous);
        let refused = |pairs: &[(&str, &str)]| Scheme::of(&fields(pairs), true).unwrap_err().code().clone();
        assert_eq!(refused(&[("policy", "p")]), S3ErrorCode::InvalidArgument);
        assert_eq!(refused(&[("x-amz-signature", "s")]), S3ErrorCode::InvalidArgument);
        let v4 = |credential: &'static str, date: &'static str| {
            refused(&[
                ("x-amz-signature", "s"),
                ("x-amz-algorithm", "AWS4-HMAC-SHA256"),
                ("x-amz-credential", credential),
                ("x-amz-date", date),
                ("policy", "p"),
            ])
        };
        assert_eq!(v4("AK/20151229/us-east-1/s3", "20151229T000000Z"), S3ErrorCode::InvalidArgument);
        assert_eq!(v4("AK/20151228/us-east-1/s3/aws4_request", "20151229T000000Z"), S3ErrorCode::InvalidArgument);
        assert_eq!(v4("AK/20151229/us-east-1/s3/aws4_request", "2015-12-29"), S3ErrorCode::InvalidArgument);
    }
}
