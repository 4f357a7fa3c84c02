//! The client's whole receive path: transport frames through the signature,
//! decryption and binding checks and dispatch to made-up pending requests
//! (see `smb_client::connection::fuzz::receive` for the input layout), then
//! the decoders a caller runs on what it was given. Any panic is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    smb_client::connection::fuzz::receive(data);
});
