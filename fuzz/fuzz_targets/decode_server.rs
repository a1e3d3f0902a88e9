//! Fuzzes `decode_server_frame` (the hand-written decoder the browser runtime uses): any input
//! is refused with a typed error or decoded, never a panic, and a decoded frame encodes to text
//! that decodes again to an equal frame.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tether_protocol::{DEFAULT_MAX_FRAME_BYTES, decode_server_frame, encode_frame};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match decode_server_frame(&text, DEFAULT_MAX_FRAME_BYTES) {
        Ok(frame) => {
            let encoded = encode_frame(&frame);
            let again = decode_server_frame(&encoded, usize::MAX).expect("an encoded frame decodes again");
            assert_eq!(again.type_name(), frame.type_name());
            assert_eq!(again.id(), frame.id());
            // Encoding is a fixed point after one round: the same frame gives the same text.
            assert_eq!(encode_frame(&again), encoded);
        }
        Err(error) => {
            let _ = (error.code(), error.frame_id(), error.to_string());
        }
    }
});
